#!/usr/bin/env bash
# The CPU work of an LLM batch as instructions (docs/benchmarks.md, P2, "Comparing CPU"): a
# count that does not move with the machine's load, for comparing two commits on a shared VM
# where CPU seconds of the same binary vary by 15% from one minute to the next.
#
#   bash benches/llm_instructions.sh            # the working tree
#   bash benches/llm_instructions.sh REV...     # each commit, from a temporary worktree
#
# For each: builds agent-db (profile `profiling`), generates a 120-conversation store
# (gen_store --conversations 120 --seed 1 --scale 1.2, the P2 shape at an eighth of its size),
# starts examples/llm_mock_server with no latency, and runs P2's command once under
# `valgrind --tool=cachegrind`. It prints the instructions executed (cachegrind's `I refs`),
# and the compacted count and tokens after, which must be equal between the commits compared.
#
# BENCH_INSTR_STORE=PATH: that store instead (e.g. one of `gen_store --shape long-outputs`, which
# older commits' gen_store does not know).
#
# Valgrind hides the CPU's SHA extensions, so sha2 runs its portable code (about 9% of the count,
# the same in every commit). Needs: cargo, valgrind, python3, curl.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT="$ROOT/bench-out/instructions"
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "llm_instructions.sh: needs valgrind" >&2; exit 2; }

# measure DIR: build in DIR (a checkout), run once under cachegrind, print one line.
measure() {
  local dir=$1 label=$2
  # The example first (its dev-dependencies turn the test-only failpoint on), the binaries after.
  (cd "$dir" && CARGO_TARGET_DIR="$ROOT/target" cargo build -q --profile profiling \
    --example llm_mock_server &&
    CARGO_TARGET_DIR="$ROOT/target" cargo build -q --profile profiling --bin agent-db --bin gen_store)
  local bin="$OUT/bin-$label"
  mkdir -p "$bin"
  cp "$ROOT/target/profiling/agent-db" "$ROOT/target/profiling/gen_store" \
    "$ROOT/target/profiling/examples/llm_mock_server" "$bin/"
  local work="$OUT/work-$label"
  rm -rf "$work" && mkdir -p "$work"
  if [[ -n "${BENCH_INSTR_STORE:-}" ]]; then
    cp "$BENCH_INSTR_STORE" "$work/store.db"
  else
    "$bin/gen_store" --conversations 120 --seed 1 --scale 1.2 --out "$work/store.db" >/dev/null 2>&1
  fi
  "$bin/llm_mock_server" --latency-ms 0 --max-seconds 900 --idle-exit-seconds 600 \
    >"$work/port" 2>"$work/mock.err" &
  local mock=$! port=""
  for _ in $(seq 100); do
    port=$(head -1 "$work/port" 2>/dev/null || true)
    [[ -n "$port" ]] && break
    sleep 0.05
  done
  [[ -n "$port" ]] || { echo "the mock server did not start" >&2; kill "$mock"; exit 1; }
  (cd "$work" && env -u AGENT_DB_CONFIG -u AGENT_DB_PATH XDG_CONFIG_HOME="$work" \
    AGENT_DB_NOW=2026-11-01T12:00:00Z AGENT_DB_API_KEY=dummy \
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
    "$bin/agent-db" --db "$work/store.db" compact --all-over 0 --idle 0 --keep-tokens 20000 \
    --strategy llm --llm-provider openai --base-url "http://127.0.0.1:$port/v1" \
    --concurrency 32 --yes --quiet --json >"$work/out.json" 2>"$work/valgrind.err")
  curl -s "http://127.0.0.1:$port/quit" >/dev/null || true
  wait "$mock" || true
  python3 - "$label" "$work" <<'PY'
import json, re, sys
label, work = sys.argv[1], sys.argv[2]
refs = re.search(r"I\s+refs:\s+([\d,]+)", open(work + "/valgrind.err").read()).group(1)
t = json.load(open(work + "/out.json"))["totals"]
print(f"{label}\tinstructions {refs}\tcompacted {t['compacted']}\ttokens_after {t['tokens_after']}")
PY
}

if [[ $# == 0 ]]; then
  measure "$ROOT" worktree
else
  for rev in "$@"; do
    tree="$OUT/tree-$rev"
    rm -rf "$tree"
    git worktree add -q --detach "$tree" "$rev"
    measure "$tree" "$rev"
    git worktree remove --force "$tree"
  done
fi
