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
