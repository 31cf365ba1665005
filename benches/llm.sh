#!/usr/bin/env bash
# LLM compaction throughput against a loopback mock server (docs/benchmarks.md, section "LLM
# compaction against a mock server"). Run from anywhere: `bash benches/llm.sh`.
#
# 1. Generates a store of BENCH_LLM_CONVERSATIONS conversations (gen_store, --scale BENCH_LLM_SCALE).
# 2. Starts examples/llm_mock_server on 127.0.0.1: an OpenAI-compatible chat completions server
#    answering every request with a short summary after BENCH_LLM_LATENCY_MS (it stops by itself
#    after 15 minutes, or 2 minutes idle, and is stopped with GET /quit after each run).
# 3. Runs, on a fresh copy of the store each time (BENCH_LLM_RUNS times):
#      AGENT_DB_API_KEY=dummy agent-db --db STORE compact --all-over 0 --idle 0 --strategy llm \
#        --llm-provider openai --base-url http://127.0.0.1:PORT/v1 --concurrency C --yes --quiet --json
#    under /usr/bin/time -v, and reports
#      ratio = wall time / (N × L / C)     (goal <= 1.15; N = requests the server answered)
#    and the peak RSS.
# 4. Diagnostics (BENCH_LLM_DIAG=1): where the wall time goes when the ratio misses the goal:
#      - the same run with L = 0 (no network wait at all: the pipeline's CPU floor);
#      - the llm dry run (selection + planning + per-request token estimates, no request, no write);
#      - the same run with a slow server (L = BENCH_LLM_SLOW_LATENCY_MS), where the network
#        dominates, with its wave bound: time to the first request + ceil(N / C) × L;
#      - the time before the first request, the request phase (first request → last answer), the
#        most requests in flight, and CPU use (user + sys) against the cores available;
#      - BENCH_LLM_PERF=1: CPU samples per thread (perf), grouped by agent-db's thread names.
#
# Everything goes under bench-out/llm/ (gitignored); results.txt holds key=value lines.
# Knobs (environment):
#   BENCH_LLM_CONVERSATIONS=1000  store size
#   BENCH_LLM_SCALE=1             gen_store --scale (1 = realistic rows, tens to hundreds of KB)
#   BENCH_LLM_STORE=              an existing store to use instead (benches/run.sh passes its own)
#   BENCH_LLM_SEED=1              gen_store --seed
#   BENCH_LLM_LATENCY_MS=200      mock server latency L
#   BENCH_LLM_CONCURRENCY=32      agent-db --concurrency C
#   BENCH_LLM_RUNS=3              timed runs (the median ratio is the headline)
#   BENCH_LLM_CPU_RUNS=0          N > 0: N more L = 0 runs of each binary, interleaved, for the CPU
#                                 figure (median and range of N; one run's CPU time varies by up
#                                 to 10% on a 2-core VM, so one L = 0 run cannot show a 5% change)
#   BENCH_LLM_DIAG=1              0 skips the diagnostic runs
#   BENCH_LLM_KEEP_TOKENS=20000   --keep-tokens; "default" = agent-db's default tail. 20,000 is
#                                 the default tail when issue 11 set the goal (20% of the window,
#                                 at most 20,000): with today's default --target 0.4 most of this
#                                 store's conversations already fit the tail, and the batch would
#                                 send ~45 requests instead of ~325.
#   BENCH_LLM_SLOW_LATENCY_MS=2000  latency of the diagnostic slow-server run (0 skips it)
#   BENCH_LLM_PERF=0              1: per-thread CPU profile of the L = 0 run (needs perf)
#   BENCH_LLM_LONG_OUTPUTS=       gen_store --long-outputs P (the share of very long tool outputs)
#   BENCH_LLM_SHAPE=default       long: gen_store --shape long-outputs (a third of tool results
#                                 are logs of 2,000-6,000 words, as long test and build logs are);
#                                 long-history: the same store with kodelet's current
#                                 `conversations.compaction_history` column (its migration
#                                 20260920120000; empty, as before a first compaction)
#   BENCH_LLM_FIXED=0             1 (with BENCH_LLM_CPU_RUNS): after each pair of L = 0 runs, the
#                                 work any program doing this batch must do, timed with other
#                                 tools (benches/llm_fixed.py: read, decode, count, compress,
#                                 write), so the summary sets agent-db's CPU beside that floor
#   BENCH_LLM_BASE=               a commit (e.g. HEAD~1): its agent-db, built from a temporary
#                                 worktree, runs beside this tree's, interleaved run by run, and
#                                 the summary prints new / base ratios; the L = 0 runs' stores and
#                                 reports are compared (benches/llm_compare.py)
#   BENCH_LLM_BASE_BIN=           or the base agent-db binary itself
#   BENCH_LLM_EXTRA=              more agent-db compact flags, e.g. "--mask-observations" (each
#                                 run's JSON line then carries the report's `masking` totals)
#   BENCH_LLM_PROFILE=release     cargo profile of the binaries (profiling: the same code with
#                                 symbols, for perf; dev: request and token counts only)
#   BENCH_LLM_NO_BUILD=0          1: use the binaries already in bench-out/llm/bin/
# Needs: cargo, python3, /usr/bin/time (GNU time), curl (or python3 for HTTP), perf (optional).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT="$ROOT/bench-out/llm"
CONVERSATIONS=${BENCH_LLM_CONVERSATIONS:-1000}
SCALE=${BENCH_LLM_SCALE:-1}
SEED=${BENCH_LLM_SEED:-1}
LATENCY=${BENCH_LLM_LATENCY_MS:-200}
CONCURRENCY=${BENCH_LLM_CONCURRENCY:-32}
RUNS=${BENCH_LLM_RUNS:-3}
DIAG=${BENCH_LLM_DIAG:-1}
CPU_RUNS=${BENCH_LLM_CPU_RUNS:-0}
FIXED=${BENCH_LLM_FIXED:-0}
SLOW=${BENCH_LLM_SLOW_LATENCY_MS:-2000}
# Tail kept verbatim (see BENCH_LLM_KEEP_TOKENS above; a small value such as 500 makes nearly
# every conversation need a summary request).
KEEP_TOKENS=${BENCH_LLM_KEEP_TOKENS:-20000}
KEEP_ARGS=()
[[ -n "$KEEP_TOKENS" && "$KEEP_TOKENS" != default ]] && KEEP_ARGS=(--keep-tokens "$KEEP_TOKENS")
PERF=${BENCH_LLM_PERF:-0}
PROFILE=${BENCH_LLM_PROFILE:-release}
SHAPE=${BENCH_LLM_SHAPE:-default}
case "$SHAPE" in
  default) SHAPE_ARGS=() ;;
  long | long-history) SHAPE_ARGS=(--shape long-outputs) ;;
  *) echo "benches/llm.sh: error: BENCH_LLM_SHAPE=$SHAPE: use default, long or long-history" >&2; exit 1 ;;
esac
BASE=${BENCH_LLM_BASE:-}
BASE_BIN=${BENCH_LLM_BASE_BIN:-}
NOW=2026-11-01T12:00:00Z
RESULTS="$OUT/results.txt"

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'benches/llm.sh: error: %s\n' "$*" >&2; exit 1; }
result() { printf '%s=%s\n' "$1" "$2" >>"$RESULTS"; }
# Wall-clock ms from bash itself (EPOCHREALTIME, bash 5): starting a process to read the clock
# (python3 took 30-40 ms here) would count its start-up as agent-db's time.
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
http_get() {
  if command -v curl >/dev/null; then
    curl -fsS --max-time 10 "$1"
  else
    python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1"
  fi
}

for tool in cargo python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
/usr/bin/time -v true >/dev/null 2>&1 || die "GNU time (/usr/bin/time -v) is required"

mkdir -p "$OUT"/{bin,raw,xdg,work}
: >"$RESULTS"
result started_at "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
result cores "$(nproc)"
result load_average_at_start "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
result conversations "$CONVERSATIONS"
result scale "$SCALE"
result latency_ms "$LATENCY"
result concurrency "$CONCURRENCY"
result shape "$SHAPE"
result commit "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo +dirty)"

# ---------------------------------------------------------------------------------------------
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
# (cargo's `dev` profile builds into target/debug.)
PROFILE_DIR=$PROFILE
[[ "$PROFILE" == dev ]] && PROFILE_DIR=debug
if [[ "${BENCH_LLM_NO_BUILD:-0}" != 1 ]]; then
  log "build ($PROFILE)"
  # The example builds with the dev-dependencies, which turn the test-only failpoint on: it builds
  # first, and the binaries after, on their own, as released.
  cargo build --profile "$PROFILE" --example llm_mock_server --example count_tokens --example json_scan
  cargo build --profile "$PROFILE" --bin agent-db --bin gen_store
  # The target dir may be shared with concurrent builds: benchmark private copies.
  for b in agent-db gen_store examples/llm_mock_server examples/count_tokens examples/json_scan; do
    cp "$TARGET_DIR/$PROFILE_DIR/$b" "$OUT/bin/$(basename "$b")"
  done
fi
ADB="$OUT/bin/agent-db"
GEN="$OUT/bin/gen_store"
MOCK="$OUT/bin/llm_mock_server"
if [[ -n "$BASE" && -z "$BASE_BIN" && "${BENCH_LLM_NO_BUILD:-0}" == 1 ]]; then
  BASE_BIN="$OUT/bin/agent-db-base"
  result base_commit "$(git rev-parse --short "$BASE^{commit}") (prebuilt)"
elif [[ -n "$BASE" && -z "$BASE_BIN" ]]; then
  # The base commit's agent-db, from a temporary worktree, into the same target dir (the
  # dependencies are shared; the crate itself builds apart, its path differs).
  BASE_SHA=$(git rev-parse --short "$BASE^{commit}")
  tree="$OUT/base-tree"
  git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
  log "build the base $BASE_SHA ($PROFILE)"
  git worktree add -q --detach "$tree" "$BASE_SHA"
  (cd "$tree" && CARGO_TARGET_DIR="$TARGET_DIR" cargo build --profile "$PROFILE" --bin agent-db)
  cp "$TARGET_DIR/$PROFILE_DIR/agent-db" "$OUT/bin/agent-db-base"
  git worktree remove --force "$tree"
  BASE_BIN="$OUT/bin/agent-db-base"
  result base_commit "$BASE_SHA"
fi
for b in "$ADB" ${BASE_BIN:+"$BASE_BIN"}; do
  if "$b" --version | grep -q failpoints; then
    die "$b was built with the test-only failpoint; a benchmark measures the released binary"
  fi
done

LONG_OUTPUTS=${BENCH_LLM_LONG_OUTPUTS:-}
LONG_ARGS=()
[[ -n "$LONG_OUTPUTS" ]] && LONG_ARGS=(--long-outputs "$LONG_OUTPUTS")
read -r -a EXTRA <<<"${BENCH_LLM_EXTRA:-}"
STORE=${BENCH_LLM_STORE:-"$OUT/store-$CONVERSATIONS-s$SEED-x$SCALE${LONG_OUTPUTS:+-long$LONG_OUTPUTS}-$SHAPE.db"}
if [[ ! -f "$STORE" ]]; then
  log "generate $CONVERSATIONS conversations (scale $SCALE, seed $SEED)"
  "$GEN" --conversations "$CONVERSATIONS" --seed "$SEED" --scale "$SCALE" --now "$NOW" --out "$STORE" --force \
    "${LONG_ARGS[@]}" "${SHAPE_ARGS[@]}"
  if [[ "$SHAPE" == long-history ]]; then
    python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("ALTER TABLE conversations ADD COLUMN compaction_history TEXT")' "$STORE"
  fi
fi
result extra_flags "${BENCH_LLM_EXTRA:-}"
result store "$STORE"
result store_bytes "$(stat -c %s "$STORE")"
result keep_tokens "${KEEP_TOKENS:-default}"

# agent-db runs hermetic: no user config, hooks or recipes, no inherited AGENT_DB_* or keys.
adb() {
  (cd "$OUT/work" && env -u AGENT_DB_CONFIG -u AGENT_DB_PATH -u AGENT_DB_LLM_PROVIDER -u AGENT_DB_MODEL \
    -u AGENT_DB_BASE_URL -u AGENT_DB_MAX_SUMMARY_TOKENS -u AGENT_DB_SUMMARY_CONTEXT -u AGENT_DB_TIMEOUT \
    -u AGENT_DB_MAX_RETRIES -u AGENT_DB_RECIPE -u AGENT_DB_INSTRUCTIONS -u AGENT_DB_MAX_COST \
    -u AGENT_DB_CONCURRENCY -u AGENT_DB_LOG -u OPENAI_API_KEY -u ANTHROPIC_API_KEY \
    XDG_CONFIG_HOME="$OUT/xdg" AGENT_DB_NOW="$NOW" AGENT_DB_API_KEY=dummy "$@")
}

# run_compact LABEL LATENCY_MS [PERF] [BINARY] [KEEP]: one timed compaction of a fresh copy
# against a fresh mock; prints one JSON line of figures and appends key=value lines to
# results.txt. KEEP=1 keeps the compacted store as raw/LABEL.db.
run_compact() {
  local label=$1 latency=$2 perf=${3:-0} bin=${4:-$ADB} keep=${5:-0}
  local work="$OUT/work/store.db" raw="$OUT/raw/$label"
  rm -f "$work" "$work-wal" "$work-shm" "$work.lock"
  cp "$STORE" "$work"
  rm -f "$raw".*
  "$MOCK" --latency-ms "$latency" --max-seconds 900 --idle-exit-seconds 120 >"$raw.port" 2>"$raw.mock.err" &
  local mock_pid=$!
  MOCK_PID=$mock_pid
  local port=""
  for _ in $(seq 100); do
    port=$(head -1 "$raw.port" 2>/dev/null || true)
    [[ -n "$port" ]] && break
    sleep 0.05
  done
  [[ -n "$port" ]] || die "the mock server did not start (see $raw.mock.err)"
  local cmd=("$bin" --db "$work" compact --all-over 0 --idle 0 "${KEEP_ARGS[@]}" --strategy llm --llm-provider openai
    --base-url "http://127.0.0.1:$port/v1" --concurrency "$CONCURRENCY" --yes --quiet --json "${EXTRA[@]}")
  echo "${cmd[*]}" >"$raw.cmd"
  local t0 t1 rc=0
  t0=$(now_ms)
  if [[ "$perf" == 1 ]]; then
    adb perf record -F 499 -g -o "$raw.perf.data" -- "${cmd[@]}" >"$raw.json" 2>"$raw.time" || rc=$?
  else
    adb /usr/bin/time -v "${cmd[@]}" >"$raw.json" 2>"$raw.time" || rc=$?
  fi
  t1=$(now_ms)
  http_get "http://127.0.0.1:$port/stats" >"$raw.stats"
  http_get "http://127.0.0.1:$port/quit" >/dev/null || true
  wait "$mock_pid" || true
  MOCK_PID=
  [[ $rc == 0 ]] || die "$label: agent-db exited $rc (see $raw.time, $raw.json)"
  if [[ "$keep" == 1 ]]; then
    sqlite3 "$work" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
    mv "$work" "$raw.db"
  fi
  python3 - "$label" "$latency" "$CONCURRENCY" "$t0" "$t1" "$raw" "$(nproc)" "$(stat -c %s "$STORE")" <<'PY' | tee -a "$RESULTS.jsonl"
import json, math, re, sys
label, latency, conc, t0, t1, raw, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], int(sys.argv[7])
store_mb = int(sys.argv[8]) / 1e6
stats = json.load(open(raw + ".stats"))
doc = json.load(open(raw + ".json"))
tot = doc["totals"]
tv = {}
for line in open(raw + ".time"):
    if ":" in line:
        k, v = line.rsplit(":", 1)
        tv[k.strip()] = v.strip()
wall = (t1 - t0) / 1000
n = stats["served"]
ideal = n * latency / 1000 / conc
first = stats["first_request_unix_ms"]
last = stats["last_answer_unix_ms"]
cpu = None
if "User time (seconds)" in tv:
    cpu = float(tv["User time (seconds)"]) + float(tv["System time (seconds)"])
wave = (first - t0) / 1000 + math.ceil(n / conc) * latency / 1000 if first else None
out = {
    "label": label,
    "latency_ms": latency,
    "concurrency": conc,
    "wall_s": round(wall, 3),
    "requests": n,
    "compacted": tot["compacted"],
    "masking": tot.get("masking"),
    # Prompt tokens as the mock counts them (a quarter of each request's bytes).
    "prompt_tokens_mock": sum((r.get("llm_tokens") or [0, 0])[0] for r in doc["conversations"]),
    "failed": tot["failed"],
    "skipped": tot["skipped"],
    "ideal_s": round(ideal, 3),
    "ratio": round(wall / ideal, 2) if ideal > 0 else None,
    "max_in_flight": stats["max_in_flight"],
    "before_first_request_s": round((first - t0) / 1000, 3) if first else None,
    "request_phase_s": round((last - first) / 1000, 3) if first and last else None,
    "after_last_answer_s": round((t1 - last) / 1000, 3) if last else None,
    "wave_bound_s": round(wave, 3) if wave else None,
    "ratio_to_wave_bound": round(wall / wave, 2) if wave else None,
    "cpu_s": round(cpu, 2) if cpu is not None else None,
    # CPU per MB of the input store (user + sys).
    "cpu_ms_per_mb": round(cpu * 1000 / store_mb, 2) if cpu is not None else None,
    "cpu_utilization_of_cores": round(cpu / wall / cores, 2) if cpu is not None and wall > 0 else None,
    "peak_rss_kb": int(tv["Maximum resident set size (kbytes)"]) if "Maximum resident set size (kbytes)" in tv else None,
}
# From the mock's arrival times: how long the first --concurrency requests took to go out (the
# ramp), and how long after a request's start the next request took its slot (the refill:
# L when the next conversation's request is ready the moment a slot frees).
arr = [a for a in stats.get("arrivals_unix_ms", []) if a]
if len(arr) > conc:
    out["ramp_s"] = round((arr[conc - 1] - arr[0]) / 1000, 3)
    gaps = sorted(arr[k] - arr[k - conc] for k in range(conc, len(arr)))
    out["refill_median_ms"] = gaps[len(gaps) // 2]
if tot["failed"]:
    sys.exit(f"{label}: {tot['failed']} conversation(s) failed")
print(json.dumps(out))
PY
}

# Never leave a mock server behind (it also stops by itself after 2 idle minutes).
MOCK_PID=
trap '[[ -n "$MOCK_PID" ]] && kill "$MOCK_PID" 2>/dev/null || true' EXIT
: >"$RESULTS.jsonl"
log "timed runs: L=${LATENCY} ms, C=$CONCURRENCY, $RUNS run(s)"
for i in $(seq "$RUNS"); do
  [[ -n "$BASE_BIN" ]] && run_compact "base-run$i" "$LATENCY" 0 "$BASE_BIN"
  run_compact "run$i" "$LATENCY"
done

if [[ "$DIAG" == 1 ]]; then
  log "diagnostic: L=0 (the pipeline's CPU floor)"
  if [[ -n "$BASE_BIN" ]]; then
    run_compact "base-floor" 0 0 "$BASE_BIN" 1
    run_compact "floor" 0 0 "$ADB" 1
    log "output: base and new, store rows and --json reports"
    python3 "$ROOT/benches/llm_compare.py" "$OUT/raw/base-floor" "$OUT/raw/floor" | tee "$OUT/raw/compare.txt" || true
    result output_identical "$(tail -1 "$OUT/raw/compare.txt")"
    rm -f "$OUT/raw/base-floor.db"
  else
    run_compact "floor" 0 0 "$ADB" 1
  fi
  if [[ "$CPU_RUNS" -gt 0 ]]; then
    log "CPU: $CPU_RUNS interleaved L=0 run(s) per binary"
    for i in $(seq "$CPU_RUNS"); do
      [[ -n "$BASE_BIN" ]] && run_compact "base-cpu$i" 0 0 "$BASE_BIN"
      run_compact "cpu$i" 0
      if [[ "$FIXED" == 1 ]]; then
        python3 "$ROOT/benches/llm_fixed.py" "$STORE" "$OUT/raw/floor.db" "$OUT/bin" "$OUT/fixed" |
          python3 -c 'import json, sys; d = dict(l.strip().split("=", 1) for l in sys.stdin if "=" in l)
print(json.dumps({"label": "fixed'"$i"'", **{k: float(v) for k, v in d.items()}}))' | tee -a "$RESULTS.jsonl"
      fi
    done
  fi
  rm -rf "$OUT/raw/floor.db" "$OUT/fixed"
  if [[ "$SLOW" != 0 ]]; then
    log "diagnostic: slow server, L=$SLOW ms"
    run_compact "slow" "$SLOW"
  fi
  log "diagnostic: llm dry run (selection + planning + estimates; no request, no write)"
  t0=$(now_ms)
  adb /usr/bin/time -v "$ADB" --db "$STORE" compact --all-over 0 --idle 0 --strategy llm --llm-provider openai \
    "${KEEP_ARGS[@]}" --base-url http://127.0.0.1:9/v1 --concurrency "$CONCURRENCY" --dry-run --quiet --json \
    >"$OUT/raw/dry.json" 2>"$OUT/raw/dry.time"
  t1=$(now_ms)
  python3 - "$t0" "$t1" "$OUT/raw/dry.time" <<'PY' | tee -a "$RESULTS.jsonl"
import json, sys
t0, t1, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
tv = {}
for line in open(path):
    if ":" in line:
        k, v = line.rsplit(":", 1)
        tv[k.strip()] = v.strip()
print(json.dumps({"label": "dry_run", "wall_s": (t1 - t0) / 1000,
                  "cpu_s": round(float(tv["User time (seconds)"]) + float(tv["System time (seconds)"]), 2),
                  "peak_rss_kb": int(tv["Maximum resident set size (kbytes)"])}))
PY
  if [[ "$PERF" == 1 ]] && command -v perf >/dev/null; then
    log "diagnostic: per-thread CPU profile of an L=0 run (perf)"
    run_compact "perf" 0 1 >/dev/null || true
    if [[ -f "$OUT/raw/perf.perf.data" ]]; then
      # CPU time per thread group (benches/perf_threads.py), and the hottest symbols.
      perf report -i "$OUT/raw/perf.perf.data" --no-children --sort pid,symbol --stdio -g none 2>/dev/null |
        grep '%' | head -40 >"$OUT/raw/perf.symbols.txt" || true
      python3 "$ROOT/benches/perf_threads.py" "$OUT/raw/perf.perf.data" perf_threads | tee -a "$RESULTS.jsonl"
    fi
  fi
fi
result load_average_at_end "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"

# ---------------------------------------------------------------------------------------------
log "summary"
python3 - "$RESULTS.jsonl" "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
timed = [r for r in rows if r["label"].startswith("run")]
base = [r for r in rows if r["label"].startswith("base-run")]
rows = [r for r in rows if r["label"] != "perf"]  # perf's own overhead makes its timings meaningless
out = open(sys.argv[2], "a")
def result(k, v):
    out.write(f"{k}={v}\n")
ratios = [r["ratio"] for r in timed if r["ratio"] is not None]
med = statistics.median(ratios) if ratios else None
result("requests", timed[0]["requests"])
result("ratio_median", med)
result("ratios", ",".join(str(r) for r in ratios))
result("peak_rss_kb_max", max(r["peak_rss_kb"] for r in timed))
for r in rows:
    for k, v in r.items():
        if k != "label":
            result(f"{r['label']}.{k}", v)
print(f"N = {timed[0]['requests']} requests, L = {timed[0]['latency_ms']} ms, C = {timed[0]['concurrency']}")
print(f"ratio wall / (N*L/C): median {med} (runs: {', '.join(map(str, ratios))}); goal <= 1.15: {'met' if med is not None and med <= 1.15 else 'MISSED'}")
print(f"peak RSS: {max(r['peak_rss_kb'] for r in timed) / 1024:.0f} MiB")
for r in rows:
    if not r["label"].startswith(("run", "base-run", "cpu", "base-cpu", "fixed")):
        print(f"{r['label']}: {json.dumps({k: v for k, v in r.items() if k != 'label'})}")
cpu_new = [r for r in rows if r["label"].startswith("cpu")]
cpu_base = [r for r in rows if r["label"].startswith("base-cpu")]
for name, rs in (("new", cpu_new), ("base", cpu_base)):
    v = sorted(r["cpu_ms_per_mb"] for r in rs)
    if v:
        print(f"CPU ms per input MB, L = 0, {name}: median {statistics.median(v)} of {len(v)} (range {v[0]}-{v[-1]})")
fixed = [r for r in rows if r["label"].startswith("fixed")]
if fixed:
    # benches/llm_fixed.py: the work any program doing this batch must do, beside agent-db's CPU.
    f = statistics.median(r["ms_per_mb"] for r in fixed)
    parts = {k: statistics.median(r[f"{k}_s"] for r in fixed) for k in ("read", "decode", "count", "compress", "write")}
    print(f"fixed work, ms per input MB: median {f} of {len(fixed)} ({', '.join(f'{k} {v:.2f} s' for k, v in parts.items())})")
    result("fixed.ms_per_mb", f)
    for name, rs in (("new", cpu_new), ("base", cpu_base)):
        if rs:
            c = statistics.median(r["cpu_ms_per_mb"] for r in rs)
            print(f"fixed work / {name}'s CPU: {f / c:.2f}")
            result(f"fixed.over_{name}", round(f / c, 2))
if base:
    by = {r["label"]: r for r in rows}
    def med(rs, k):
        v = [r[k] for r in rs if r.get(k) is not None]
        return statistics.median(v) if v else None
    figures = [
        ("wall / floor (median)", med(base, "ratio"), med(timed, "ratio")),
        ("max in flight (least)", min(r["max_in_flight"] for r in base), min(r["max_in_flight"] for r in timed)),
        ("peak RSS MiB (most)", max(r["peak_rss_kb"] for r in base) / 1024, max(r["peak_rss_kb"] for r in timed) / 1024),
        ("CPU ms per input MB (median)", med(base, "cpu_ms_per_mb"), med(timed, "cpu_ms_per_mb")),
    ]
    if "base-floor" in by and "floor" in by:
        figures.append(("CPU ms per input MB, L = 0", by["base-floor"]["cpu_ms_per_mb"], by["floor"]["cpu_ms_per_mb"]))
    if cpu_base and cpu_new:
        figures.append((f"CPU ms per input MB, L = 0, median (of {len(cpu_new)})", med(cpu_base, "cpu_ms_per_mb"), med(cpu_new, "cpu_ms_per_mb")))
    print(f"{'':32} {'base':>10} {'new':>10} {'new/base':>9}")
    for name, b, n in figures:
        ratio = round(n / b, 2) if b else None
        print(f"{name:32} {b:>10.2f} {n:>10.2f} {ratio!s:>9}")
        key = name.split(" (")[0].replace(" / ", "_over_").replace(" ", "_").replace(",", "").replace("=", "").lower()
        result(f"base.{key}", round(b, 2))
        result(f"new.{key}", round(n, 2))
        result(f"ratio.{key}", ratio)
PY
echo "results: $RESULTS" >&2
