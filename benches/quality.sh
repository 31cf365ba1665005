#!/bin/sh
# Retention per strategy (benches/quality.sh): generates a store of each agent's layout with
# gen_store (the synth crate), then runs `agent-db compact --dry-run --json` with prune and extractive on
# every conversation and prints the mean retention score and the per-kind kept/total. Rerunnable;
# writes only under a temp directory. Usage: benches/quality.sh [CONVERSATIONS]
set -eu
N=${1:-40}
cd "$(dirname "$0")/.."
cargo build -q --bin gen_store --bin agent-db
BIN=target/debug/agent-db
GEN=target/debug/gen_store
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$GEN" --conversations "$N" --seed 1 --out "$T/kodelet.db" >/dev/null
for s in docker-agent-modern goose-v16; do "$GEN" --store "$s" --out "$T/$s.db" >/dev/null 2>&1 || true; done
for db in "$T"/*.db; do
  for strat in prune extractive; do
    "$BIN" --db "$db" compact --all-over 0 --idle 0 --force --keep-tokens 2000 \
      --strategy "$strat" --dry-run --json 2>/dev/null |
      python3 -c '
import json, sys
doc = json.load(sys.stdin)
rows = [r["retention"] for r in doc.get("conversations", []) if "retention" in r]
kinds = {}
for r in rows:
    for k, c in r["by_kind"].items():
        a = kinds.setdefault(k, [0, 0]); a[0] += c["kept"]; a[1] += c["total"]
mean = sum(r["score"] for r in rows) / len(rows) if rows else float("nan")
print(f"{sys.argv[1]:<24} {sys.argv[2]:<10} n={len(rows):<4} mean={mean:.3f} " +
      " ".join(f"{k}={a[0]}/{a[1]}" for k, a in sorted(kinds.items())))
' "$(basename "$db" .db)" "$strat"
  done
done

# Drift 1→5: the longest of 8 generated kodelet conversations (OpenAI Chat) compacted five
# times with the extractive strategy, 12 new turns appended between compactions (each naming
# new paths). After each compaction: the share of the facts of its first 8 messages (paths,
# numbers of three or more digits; those no later message repeats) the stored history still
# holds, and the summary's size in characters.
# "originals" is agent-db's re-summary from the archive; "carried" prunes the archive before
# each compaction, so each summary is written from the one before (the fallback).
"$GEN" --conversations 8 --seed 3 --formats openai --scale 4 --out "$T/drift.db" >/dev/null
for mode in originals carried; do
  cp "$T/drift.db" "$T/drift-$mode.db"
  python3 - "$BIN" "$T/drift-$mode.db" "$mode" <<'PY'
import json, re, sqlite3, subprocess, sys
bin_, db, mode = sys.argv[1:]
c = sqlite3.connect(db)
cid, raw = c.execute("SELECT id, raw_messages FROM conversations ORDER BY length(raw_messages) DESC").fetchone()
text = lambda m: json.dumps(m.get("content")) + json.dumps(m.get("tool_calls"))
def facts_of(ms):
    t = " ".join(text(m) for m in ms).replace('\\"', '"')
    return set(re.findall(r"(?:[\w.-]+/)+[\w.-]+\.\w+", t)) | set(re.findall(r"\b\d{3,}\b", t))
facts = facts_of(json.loads(raw)[:8]) - facts_of(json.loads(raw)[8:])
kept, sizes = [], []
for k in range(1, 6):
    if mode == "carried":
        subprocess.run([bin_, "--db", db, "prune-archive", "--older-than", "0s", "--yes"],
                       env={"AGENT_DB_NOW": "2099-01-01T00:00:00Z", "PATH": "/usr/bin:/bin"},
                       check=True, capture_output=True)
    out = subprocess.run([bin_, "--db", db, "compact", cid, "--keep-tokens", "2000", "--force",
                          "--yes", "--json", "--strategy", "extractive"], capture_output=True, text=True)
    row = json.loads(out.stdout)["conversations"][0]
    assert row["status"] == "compacted", row
    msgs = json.loads(c.execute("SELECT raw_messages FROM conversations WHERE id = ?", (cid,)).fetchone()[0])
    hist = " ".join(text(m) for m in msgs).replace('\\"', '"')
    kept.append(sum(f in hist for f in facts) / len(facts) if facts else float("nan"))
    sizes.append(len(msgs[0]["content"]))
    msgs_raw = c.execute("SELECT raw_messages FROM conversations WHERE id = ?", (cid,)).fetchone()[0].rstrip()[:-1]
    new = []
    for t in range(12):
        new.append({"role": "user", "content": f"Continue with round {k} task {t}."})
        new.append({"role": "assistant", "content": "\n".join(
            f"Edited src/later/round{k}_{t}_{j}.rs and ran cargo check" for j in range(3))
            + " " + "the change is done and the tests pass " * 40})
    c.execute("UPDATE conversations SET raw_messages = ? WHERE id = ?", (msgs_raw + "," + ",".join(json.dumps(m) for m in new) + "]", cid))
    c.commit()
print(f"drift 1→5 {mode:<10} facts={len(facts)} kept=" + " ".join(f"{x:.2f}" for x in kept)
      + " summary_chars=" + " ".join(str(s) for s in sizes))
PY
done
