#!/bin/sh
# Retention per strategy (benches/quality.sh): generates a store of each agent's layout with
# gen_store (the synth crate: kodelet, docker-agent's current line, goose v16, opencode 1.18),
# gives every root session of the three stores that keep to-dos outside the history an agent's
# own to-do list (two open items, one closed; planted with Python's sqlite3, the agents' own
# shapes), then:
#   retention_by_strategy  dry-runs `compact --keep-tokens 2000` with prune and extractive on
#                          every conversation and prints the mean retention score and kept/total
#                          per kind;
#   llm_ledger_and_floor   compacts copies with the llm strategy against a model server on
#                          127.0.0.1 whose summary drops every artifact on purpose: with no floor
#                          (the artifact ledger must keep >= 99% of commands, to-dos and rules;
#                          paths fill the rest of its bound),
#                          then with --min-retention 0.95 (nothing under the floor is written)
#                          and with --fallback (the next strategy lands instead);
#   drift                  five successive extractive compactions of one growing conversation,
#                          from the originals and from the earlier summary (below).
# Rerunnable; writes only under a temp directory; the model server answers only 127.0.0.1 and
# stops with the script. Usage: benches/quality.sh [CONVERSATIONS]
set -eu
N=${1:-40}
cd "$(dirname "$0")/.."
cargo build -q --bin gen_store --bin agent-db
BIN=$PWD/target/debug/agent-db
GEN=$PWD/target/debug/gen_store
T=$(mktemp -d)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

gen_stores() {
  "$GEN" --conversations "$N" --seed 1 --out "$T/kodelet.db" >/dev/null 2>&1
  for s in docker-agent-current goose-v16 opencode; do
    "$GEN" --store "$s" --conversations "$N" --seed 1 --out "$T/$s.db" >/dev/null 2>&1
  done
}

# Two open to-dos and a closed one per root session, in each agent's own to-do storage.
plant_todos() {
  python3 - "$T" <<'PY'
import hashlib, json, sqlite3, sys
t = sys.argv[1]
def items(sid):
    # Made-up words, so that a to-do matches only where its text was kept.
    h = hashlib.sha256(sid.encode()).hexdigest()
    w = ["q" + h[i:i + 5] for i in range(0, 30, 5)]
    return [(f"Finish batch {w[0]} {w[1]}", "pending"),
            (f"Rerun soak {w[2]} {w[3]}", "in-progress"),
            (f"Draft note {w[4]} {w[5]}", "completed")]
c = sqlite3.connect(f"{t}/docker-agent-current.db")
for (sid,) in c.execute("SELECT id FROM sessions WHERE parent_id IS NULL").fetchall():
    todos = [{"id": f"todo_{i+1}", "description": d, "status": s} for i, (d, s) in enumerate(items(sid))]
    c.execute("INSERT INTO session_todos (session_id, todos) VALUES (?, ?)", (sid, json.dumps(todos)))
c.commit()
c = sqlite3.connect(f"{t}/opencode.db")
for (sid,) in c.execute("SELECT id FROM session WHERE parent_id IS NULL").fetchall():
    for i, (d, s) in enumerate(items(sid)):
        s = s.replace("-", "_")
        c.execute("INSERT INTO todo (session_id, content, status, priority, position, time_created, time_updated) "
                  "VALUES (?, ?, ?, 'medium', ?, 1, 1)", (sid, d, s, i))
c.commit()
c = sqlite3.connect(f"{t}/goose-v16.db")
for (sid, data) in c.execute("SELECT id, extension_data FROM sessions").fetchall():
    ext = json.loads(data or "{}")
    ext["todo.v0"] = {"content": "\n".join(
        ("- [x] " if s == "completed" else "- [ ] ") + d for d, s in items(sid))}
    c.execute("UPDATE sessions SET extension_data = ? WHERE id = ?", (json.dumps(ext), sid))
c.commit()
for db in ("kodelet", "docker-agent-current", "goose-v16", "opencode"):
    sqlite3.connect(f"{t}/{db}.db").execute("PRAGMA wal_checkpoint(TRUNCATE)")
PY
}

# Reads a compact --json document on stdin; prints one line: mean score and kept/total per kind.
SUMMARIZE='
import json, sys
doc = json.load(sys.stdin)
rows = [r for r in doc.get("conversations", []) if "retention" in r]
if len(sys.argv) > 3:
    rows = [r for r in rows if r["status"] == sys.argv[3]]
kinds = {}
for r in rows:
    for k, c in r["retention"]["by_kind"].items():
        a = kinds.setdefault(k, [0, 0]); a[0] += c["kept"]; a[1] += c["total"]
mean = sum(r["retention"]["score"] for r in rows) / len(rows) if rows else float("nan")
print(f"{sys.argv[1]:<22} {sys.argv[2]:<20} n={len(rows):<4} mean={mean:.3f} " +
      " ".join(f"{k}={a[0]}/{a[1]}" for k, a in sorted(kinds.items())))
'

retention_by_strategy() {
  for db in "$T"/*.db; do
    for strat in prune extractive; do
      "$BIN" --db "$db" compact --all-over 0 --idle 0 --force --keep-tokens 2000 \
        --strategy "$strat" --dry-run --json 2>/dev/null |
        python3 -c "$SUMMARIZE" "$(basename "$db" .db)" "$strat" || true
    done
  done
}

# An OpenAI-compatible chat endpoint on 127.0.0.1 whose every answer is a summary that names no
# path, command, to-do, rule or identifier.
start_dropping_model() {
  python3 - "$T/port" <<'PY' &
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"id": "x", "object": "chat.completion", "model": "dropper",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "## Summary\nThe user and the assistant worked on the task; it went well."}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
  SERVER_PID=$!
  while [ ! -s "$T/port" ]; do sleep 0.1; done
}

# Commands, to-dos and rules at >= 0.99 over every compacted conversation of a run, or exit 1
# (paths fill what is left of the ledger's 8,000 characters, and are reported).
CHECK_LEDGER='
import json, sys
doc = json.load(sys.stdin)
rows = [r for r in doc.get("conversations", []) if r.get("status") == "compacted"]
bad = []
for k in ("command", "todo", "rule"):
    kept = sum(r["retention"]["by_kind"].get(k, {}).get("kept", 0) for r in rows)
    total = sum(r["retention"]["by_kind"].get(k, {}).get("total", 0) for r in rows)
    if total and kept / total < 0.99:
        bad.append(f"{k} {kept}/{total}")
if not rows or bad:
    print(f"{sys.argv[1]}: ledger check FAILED: {len(rows)} compacted; " + ", ".join(bad)); sys.exit(1)
'

# Under the floor nothing is written: every compacted row is at or over it, every refused row
# under it; with --fallback the strategy that landed is counted.
FLOOR='
import json, sys
doc = json.load(sys.stdin)
rows = [r for r in doc.get("conversations", []) if "retention" in r]
done = [r for r in rows if r["status"] == "compacted"]
refused = [r for r in rows if r["status"] == "skipped" and "--min-retention" in r.get("detail", "")]
assert all(r["retention"]["score"] >= 0.95 for r in done), "a compaction under the floor was written"
assert all(r["retention"]["score"] < 0.95 for r in refused)
landed = {}
for r in done:
    landed[r["strategy"]] = landed.get(r["strategy"], 0) + 1
print(f"{sys.argv[1]:<22} {sys.argv[2]:<20} compacted={len(done)} refused={len(refused)} landed={landed}")
'

llm_ledger_and_floor() {
  start_dropping_model
  url="http://127.0.0.1:$(cat "$T/port")/v1"
  for db in "$T"/*.db; do
    name=$(basename "$db" .db)
    for mode in none floor fallback; do
      cp "$db" "$T/run.db"
      case $mode in
        none) extra="--min-retention 0" ;;
        floor) extra="--min-retention 0.95" ;;
        fallback) extra="--min-retention 0.95 --fallback" ;;
      esac
      # shellcheck disable=SC2086
      AGENT_DB_API_KEY=x "$BIN" --db "$T/run.db" compact --all-over 0 --idle 0 --force \
        --keep-tokens 2000 --strategy llm --llm-provider openai --model dropper \
        --base-url "$url" --yes --json $extra 2>/dev/null >"$T/out.json" || true
      case $mode in
        none)
          python3 -c "$SUMMARIZE" "$name" "llm (drops all)" compacted <"$T/out.json"
          python3 -c "$CHECK_LEDGER" "$name" <"$T/out.json"
          ;;
        *) python3 -c "$FLOOR" "$name" "llm $mode 0.95" <"$T/out.json" ;;
      esac
      rm -f "$T/run.db" "$T/run.db-wal" "$T/run.db-shm"
    done
  done
}

# Drift 1→5: the longest of 8 generated kodelet conversations (OpenAI Chat) compacted five
# times with the extractive strategy, 12 new turns appended between compactions (each naming
# new paths). After each compaction: the share of the facts of its first 8 messages (paths,
# numbers of three or more digits; those no later message repeats) the stored history still
# holds, and the summary's size in characters.
# "originals" is agent-db's re-summary from the archive; "carried" prunes the archive before
# each compaction, so each summary is written from the one before (the fallback).
drift() {
  mkdir -p "$T/drift"
  "$GEN" --conversations 8 --seed 3 --formats openai --scale 4 --out "$T/drift/drift.db" >/dev/null
  for mode in originals carried; do
  cp "$T/drift/drift.db" "$T/drift/drift-$mode.db"
  python3 - "$BIN" "$T/drift/drift-$mode.db" "$mode" <<'PY'
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
}

gen_stores
plant_todos
retention_by_strategy
llm_ledger_and_floor
drift
