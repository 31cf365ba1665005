#!/usr/bin/env bash
# agent-db benchmarks (docs/benchmarks.md). Run from anywhere: `bash benches/run.sh`.
# One run produces every figure with its baseline:
#
#   P1  `agent-db list --all-over 0.7 --idle 0 --ids` (the selected ids) against the cheapest
#       sqlite3 query that returns the same id set (the "floor", written here: kodelet's reads
#       conversation_summaries alone, docker-agent's reads sessions and the latest assistant
#       message of each, goose's reads sessions alone, opencode's the newest finished assistant
#       message of each session), warm page cache and after evicting the store's pages. A grid:
#       every agent in BENCH_P1_AGENTS × every selected fraction in BENCH_P1_FRACTIONS, each on
#       its own BENCH_P1_N-conversation store of the heavy-user shape (gen_store --shape
#       heavy-user --over-share F), generated, measured and deleted one at a time. The id sets
#       are checked to be equal. Also `list ... --json` (every listed row, with its fields)
#       against the floor of the listed ids (selected, plus skipped for unknown utilization),
#       warm only.
#   P2  benches/llm.sh: the LLM batch (1,000 conversations, 200 ms mock latency,
#       --concurrency 32, default tail) against its latency floor N × L / C, with the most
#       requests in flight and the peak RSS.
#   P3  o200k_base token counting (examples/count_tokens.rs) against Python tiktoken on the same
#       corpus (the raw_messages of the 1,000-conversation store); totals must be identical.
#   P4  the offline (extractive) batch over the 1,000-conversation store with --jobs 1 and
#       --jobs 2.
#   RSS peak RSS of `compact --all-over 0.7 --idle 0 --dry-run --json` (and of `list`) on every
#       kodelet P1 store.
#
# Everything goes under bench-out/ (gitignored): stores, SQL, raw outputs, the tiktoken venv and
# results.txt (key=value lines). Knobs (environment):
#   BENCH_P1_N=100000           conversations of every P1 store
#   BENCH_P1_AGENTS="kodelet docker-agent goose opencode"
#   BENCH_P1_FRACTIONS="0.01 0.33 0.9"   gen_store --over-share of the P1 stores
#   BENCH_P1_SHAPE=heavy-user   gen_store --shape of the P1 stores (default: the generator's mix
#                               at the store's --scale; see docs/benchmarks.md, Stores)
#   BENCH_KEEP_STORES=0         1: keep the P1 stores after measuring (about 3-5 GB each at 100k)
#   BENCH_P1_DRY_RUN=1          0: no `compact --dry-run` RSS check on the kodelet P1 stores (it
#                               plans every selected conversation: minutes at 90% selected)
#   BENCH_ONLY_P1=0             1: the P1 grid (with its RSS checks) and nothing else
#   BENCH_NO_BUILD=0            1 (with BENCH_ONLY_P1=1): no build; the binaries in bench-out/bin
#   BENCH_SEED=1                gen_store --seed
#   BENCH_REUSE=0               1: keep stores generated earlier with the same parameters and
#                               the same generator sources (fixtures/synth, fixtures/synth/src/bin/gen_store.rs)
#   BENCH_LIST_RUNS=10          timed warm runs per P1 command (hyperfine, two passes ABBA)
#   BENCH_COLD_RUNS=5           timed cold runs per P1 command
#   BENCH_TOKEN_RUNS=3          interleaved runs of each tokenizer
#   BENCH_P4_RUNS=5             runs of each P4 configuration (interleaved; the median is taken)
#   BENCH_P4_PERF=0             1: one more, untimed --jobs 2 run of P4 under perf: CPU per thread
#                               group (benches/perf_threads.py) and w_over_p, what P4's ratio
#                               depends on (results p4.perf.*)
#   BENCH_P4_KEEP_TOKENS=20000  P4's --keep-tokens (the tail of issue 11's time; with the default
#                               --target 0.4 most of the store already fits and only ~49 of 1,000
#                               conversations would be compacted; with it, ~325)
#   BENCH_SKIP_LLM=0            1: skip P2
#   (the P1 stores are generated inside the grid, one at a time)
# Needs: cargo, sqlite3, python3 (venv + pip reaching PyPI once, for tiktoken), GNU time
# (/usr/bin/time), hyperfine (optional; a bash loop is used without it), curl.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT="$ROOT/bench-out"
P1_N=${BENCH_P1_N:-100000}
P1_AGENTS=(${BENCH_P1_AGENTS:-kodelet docker-agent goose opencode})
P1_FRACTIONS=(${BENCH_P1_FRACTIONS:-0.01 0.33 0.9})
P1_SHAPE=${BENCH_P1_SHAPE:-heavy-user}
KEEP_STORES=${BENCH_KEEP_STORES:-0}
P1_DRY_RUN=${BENCH_P1_DRY_RUN:-1}
ONLY_P1=${BENCH_ONLY_P1:-0}
SEED=${BENCH_SEED:-1}
REUSE=${BENCH_REUSE:-0}
LIST_RUNS=${BENCH_LIST_RUNS:-10}
COLD_RUNS=${BENCH_COLD_RUNS:-5}
TOKEN_RUNS=${BENCH_TOKEN_RUNS:-3}
P4_RUNS=${BENCH_P4_RUNS:-5}
P4_PERF=${BENCH_P4_PERF:-0}
SKIP_LLM=${BENCH_SKIP_LLM:-0}
P4_KEEP=${BENCH_P4_KEEP_TOKENS:-20000}
THRESHOLD=0.7
NOW=2026-11-01T12:00:00Z
RESULTS="$OUT/results.txt"
rm -rf "$OUT/raw" # per-run outputs; stores, venv and the vocabulary cache are kept
mkdir -p "$OUT"/{bin,stores,sql,raw,tiktoken-cache,p4}

log() { printf '\n== %s  (%s, load %s)\n' "$*" "$(date -u +%H:%M:%S)" "$(cut -d' ' -f1-3 /proc/loadavg)" >&2; }
die() { printf 'benches/run.sh: error: %s\n' "$*" >&2; exit 1; }
result() { printf '%s=%s\n' "$1" "$2" >>"$RESULTS"; }
py() { python3 -c "$@"; }

for tool in cargo sqlite3 python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
/usr/bin/time -v true >/dev/null 2>&1 || die "GNU time (/usr/bin/time -v) is required"
if [[ -z "${BENCH_NO_HYPERFINE:-}" ]] && command -v hyperfine >/dev/null; then HYPERFINE=1; else HYPERFINE=0; fi

: >"$RESULTS"
result started_at "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# ---------------------------------------------------------------------------------------------
log "build (release)"
BINS=(agent-db gen_store)
if [[ "${BENCH_NO_BUILD:-0}" == 1 ]]; then # the binaries an earlier run copied to bench-out/bin
  BINS=()
  [[ "$ONLY_P1" == 1 ]] || die "BENCH_NO_BUILD=1 needs BENCH_ONLY_P1=1"
elif [[ "$ONLY_P1" == 1 ]]; then
  cargo build --release --bins
else
  # Examples build with the dev-dependencies, which turn the test-only failpoint on: they build
  # first, and the binaries after, on their own, as released.
  cargo build --release --examples
  cargo build --release --bins
  BINS+=(examples/count_tokens examples/llm_mock_server)
fi
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  py 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
# The target dir may be shared with concurrent builds: benchmark private copies.
for b in ${BINS[@]+"${BINS[@]}"}; do
  cp "$TARGET_DIR/release/$b" "$OUT/bin/$(basename "$b")"
done
ADB="$OUT/bin/agent-db"
GEN="$OUT/bin/gen_store"
COUNT="$OUT/bin/count_tokens"
if "$ADB" --version | grep -q failpoints; then
  die "$ADB was built with the test-only failpoint; a benchmark measures the released binary"
fi

log "machine"
result machine.nproc "$(nproc)"
result machine.mem_total_mb "$(awk '/MemTotal/ {printf "%d", $2/1024}' /proc/meminfo)"
result machine.cpu "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
result machine.loadavg_start "$(cut -d' ' -f1-3 /proc/loadavg)"
result machine.rustc "$(rustc --version)"
result machine.sqlite3_cli "$(sqlite3 --version | cut -d' ' -f1-2)"
result machine.python "$(python3 --version)"
result machine.hyperfine "$( ((HYPERFINE)) && hyperfine --version || echo 'absent: bash-loop median')"
result machine.git "$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo '+dirty')"

# ---------------------------------------------------------------------------------------------
# Stores. A store is reused (BENCH_REUSE=1) when its parameters and the generator's sources are
# unchanged (the binary's hash would change with any edit to the library).
# Only the sources that write kodelet and docker-agent stores count (another store's generator,
# or lib.rs gaining a `mod` line for one, does not invalidate these stores).
GEN_SRC=$(ls fixtures/synth/src/*.rs | grep -v -e goose -e opencode | xargs cat fixtures/synth/src/bin/gen_store.rs |
  grep -v -E '^(pub )?mod [a-z_]+;$' | sha1sum | cut -c1-12)
GEN_SRC_GOOSE=$(cat fixtures/synth/src/goose*.rs fixtures/synth/src/bin/gen_store.rs | sha1sum | cut -c1-12)
GEN_SRC_OPENCODE=$(cat fixtures/synth/src/opencode*.rs fixtures/synth/src/bin/gen_store.rs | sha1sum | cut -c1-12)
# store KIND N SCALE [OVER [SHAPE]] -> path (generates unless reusable); SCALE "-": the shape's own
store() {
  local kind=$1 n=$2 scale=$3 over_share=${4:-} shape=${5:-default} s stamp want
  local args=(--shape "$shape")
  [[ $scale != - ]] && args+=(--scale "$scale")
  [[ -n $over_share ]] && args+=(--over-share "$over_share")
  s="$OUT/stores/$kind-$n-s$scale-seed$SEED${over_share:+-over$over_share}${shape/#default/}.db"
  stamp="$s.params"
  local src=$GEN_SRC
  [[ $kind == goose* ]] && src=$GEN_SRC_GOOSE
  [[ $kind == opencode* ]] && src=$GEN_SRC_OPENCODE
  want="kind=$kind conversations=$n seed=$SEED now=$NOW ${args[*]} gen_src=$src"
  if [[ "$REUSE" == 1 && -f "$s" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "reusing $s" >&2
  else
    rm -f "$stamp"
    local t0 t1
    t0=$(date +%s.%N)
    /usr/bin/time -f '%e s wall, %U s user, %S s sys, %M KB peak RSS' \
      "$GEN" --store "$kind" --conversations "$n" --seed "$SEED" --now "$NOW" \
      "${args[@]}" --out "$s" --force 2>"$s.gen.log" || { cat "$s.gen.log" >&2; die "gen_store failed"; }
    t1=$(date +%s.%N)
    cat "$s.gen.log" >&2
    py "print(f'{$t1-$t0:.1f}')" >"$s.gen_s"
    echo "$want" >"$stamp"
  fi
  echo "$s"
}
file_mb() { py 'import os, sys; print(f"{sum(os.path.getsize(p) for p in sys.argv[1:] if os.path.exists(p)) / 1e6:.1f}")' "$1" "$1-wal"; }
drop_store() { ((KEEP_STORES)) || rm -f "$1" "$1-wal" "$1-shm" "$1.params" "$1.agent-db.lock"; }

if [[ "$ONLY_P1" != 1 ]]; then
  BATCH=$(store kodelet 1000 1)
  result store.batch.path "$BATCH"
  result store.batch.file_mb "$(file_mb "$BATCH")"
  result store.batch.gen_log "$(tail -1 "$BATCH.gen.log" 2>/dev/null)"
fi

# ---------------------------------------------------------------------------------------------
# P1 floors: the cheapest sqlite3 query returning the id set `list --all-over 0.7 --idle 0`
# prints (selected rows, and rows skipped because their utilization is unknown).
#
# kodelet: conversation_summaries alone, one full scan, no order, no join. Utilization is
# usage.currentContextWindow / usage.maxContextWindow; unknown when the current size is missing
# or the maximum is 0 or missing.
cat >"$OUT/sql/floor-kodelet.sql" <<SQL
SELECT id FROM conversation_summaries
WHERE json_extract(usage, '\$.currentContextWindow') IS NULL
   OR IFNULL(json_extract(usage, '\$.maxContextWindow'), 0) <= 0
   OR CAST(json_extract(usage, '\$.currentContextWindow') AS REAL)
      / json_extract(usage, '\$.maxContextWindow') >= $THRESHOLD;
SQL
# docker-agent: root sessions; the context size is input_tokens + output_tokens (the last model
# call); the limit comes from the model of the latest assistant message (found newest first on
# idx_session_items_session), mapped by the longest matching prefix of agent-db's table
# (src/models.rs, read here); unknown model = skipped. The model is computed once per session
# (a MATERIALIZED CTE: written inline, SQLite would run the subquery once per CASE branch).
LIMIT_CASE=$(py '
import re
pairs = re.findall(r"\(\"([^\"]+)\", ([0-9_]+)\)", open("src/models.rs").read().split("#[cfg(test)]")[0])
pairs.sort(key=lambda p: -len(p[0]))
print("CASE " + " ".join(f"WHEN m LIKE \x27{p}%\x27 THEN {v.replace(chr(95), str())}" for p, v in pairs) + " END")')
cat >"$OUT/sql/floor-docker-agent.sql" <<SQL
WITH r AS MATERIALIZED (
  SELECT s.id AS id, s.input_tokens + s.output_tokens AS cur,
    lower((SELECT i.message_json ->> '\$.model' FROM session_items i
            WHERE i.session_id = s.id AND i.item_type = 'message'
              AND i.message_json ->> '\$.role' = 'assistant'
            ORDER BY i.position DESC LIMIT 1)) AS m
  FROM sessions s WHERE s.parent_id IS NULL OR s.parent_id = '')
SELECT id FROM (SELECT id, cur, $LIMIT_CASE AS lim FROM r)
WHERE lim IS NULL OR cur IS NULL OR CAST(cur AS REAL) / lim >= $THRESHOLD;
SQL

# The floors of the selected ids alone (`list --ids`): unknown utilization is not selected.
cat >"$OUT/sql/floor-kodelet-selected.sql" <<SQL
SELECT id FROM conversation_summaries
WHERE json_extract(usage, '\$.maxContextWindow') > 0
  AND CAST(json_extract(usage, '\$.currentContextWindow') AS REAL)
      / json_extract(usage, '\$.maxContextWindow') >= $THRESHOLD;
SQL
sed 's|WHERE lim IS NULL OR cur IS NULL OR CAST|WHERE CAST|' "$OUT/sql/floor-docker-agent.sql" \
  >"$OUT/sql/floor-docker-agent-selected.sql"

# ---------------------------------------------------------------------------------------------
# Timing. TIMES[label] = "median_s mean_s min_s runs cpu_s": wall-clock median, mean and min
# over the timed runs, and the median user+system CPU seconds of a run (hyperfine reports CPU
# only as a mean over its runs: with hyperfine, the mean). The machine is shared:
# wall time includes waiting for a core, CPU time mostly does not, so both are reported.
median_of() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m}'; }
declare -A TIMES
# time_group NAME RUNS WARMUP -- label1 'cmd1' label2 'cmd2' ...; PREPARE (a plain command
# line), when set, runs untimed before every run. hyperfine: two passes in opposite command
# orders (ABBA), RUNS/2 runs each, merged. Without it: a bash loop alternating the order.
time_group() {
  local name=$1 runs=$2 warmup=$3; shift 4
  local labels=() cmds=() i l
  while (($#)); do labels+=("$1"); cmds+=("$2"); shift 2; done
  if ((HYPERFINE)); then
    local n=${#cmds[@]} half=$(((runs + 1) / 2)) fwd=() rev=() jsons=() prep=()
    for ((i = 0; i < n; i++)); do fwd+=(-n "${labels[$i]}" "${cmds[$i]}"); done
    for ((i = n - 1; i >= 0; i--)); do rev+=(-n "${labels[$i]}" "${cmds[$i]}"); done
    [[ -n "${PREPARE:-}" ]] && prep=(--prepare "$PREPARE")
    hyperfine -N --style basic --warmup "$warmup" --runs "$half" "${prep[@]}" \
      --export-json "$OUT/raw/$name.1.json" "${fwd[@]}" >&2
    hyperfine -N --style basic --warmup "$((warmup > 0 ? 1 : 0))" --runs "$half" "${prep[@]}" \
      --export-json "$OUT/raw/$name.2.json" "${rev[@]}" >&2
    jsons=("$OUT/raw/$name.1.json" "$OUT/raw/$name.2.json")
    while read -r label stats; do TIMES[$label]=$stats; done < <(py '
import json, statistics, sys
acc = {}
for path in sys.argv[1:]:
    for r in json.load(open(path))["results"]:
        a = acc.setdefault(r["command"], {"t": [], "cpu": 0.0})
        a["t"] += r["times"]
        a["cpu"] += (r["user"] + r["system"]) * len(r["times"])
for label, a in acc.items():
    t, cpu = a["t"], a["cpu"] / len(a["t"])
    print(label, f"{statistics.median(t):.6f} {statistics.mean(t):.6f} {min(t):.6f} {len(t)} {cpu:.6f}")' "${jsons[@]}")
  else
    local r k order raw="$OUT/raw/$name.loop.txt" TIMEFORMAT
    : >"$raw"
    for ((r = 0; r < warmup + runs; r++)); do
      order=("${!cmds[@]}")
      ((r % 2)) && order=($(printf '%s\n' "${order[@]}" | tac))
      for k in "${order[@]}"; do
        # shellcheck disable=SC2086
        [[ -n "${PREPARE:-}" ]] && $PREPARE >/dev/null
        local TIMEFORMAT="${labels[$k]} $r %R %U %S"
        { eval "time ${cmds[$k]} >/dev/null 2>&1"; } 2>>"$raw"
      done
    done
    while read -r label stats; do TIMES[$label]=$stats; done < <(py '
import statistics, sys
warmup = int(sys.argv[2]); acc = {}
for line in open(sys.argv[1]):
    label, r, real, user, sys_ = line.split()
    if int(r) < warmup:
        continue
    a = acc.setdefault(label, {"t": [], "cpu": []})
    a["t"].append(float(real)); a["cpu"].append(float(user) + float(sys_))
for label, a in acc.items():
    t, c = a["t"], statistics.median(a["cpu"])
    print(label, f"{statistics.median(t):.6f} {statistics.mean(t):.6f} {min(t):.6f} {len(t)} {c:.6f}")' "$raw" "$warmup")
  fi
  for l in "${labels[@]}"; do echo "$name $l: median/mean/min/runs/cpu ${TIMES[$l]}" >&2; done
}
med() { echo "${TIMES[$1]}" | cut -d' ' -f1; }
cpu() { echo "${TIMES[$1]}" | cut -d' ' -f5; }
ratio() { py "print(f'{$1/$2:.3f}')"; }
# peak RSS (KB) of one run; stdout to RSS_STDOUT or /dev/null
peak_rss_kb() {
  /usr/bin/time -v "$@" 2>"$OUT/raw/time.err" >"${RSS_STDOUT:-/dev/null}" || { cat "$OUT/raw/time.err" >&2; return 1; }
  awk -F': ' '/Maximum resident set size/ {print $2}' "$OUT/raw/time.err"
}

# ---------------------------------------------------------------------------------------------
# p1 KIND F STORE: P1 on one store (selected fraction F) against $OUT/sql/floor-KIND.sql: the id
# sets compared, then warm and cold timings of both, as p1.KIND.F.* results.
p1() {
  local kind=$1 n=$2 s=$3 k="p1.$1.$2" l m mean mn r c
  local ids_cmd="$ADB --db $s list --all-over $THRESHOLD --idle 0 --ids"
  local sel_cmd="sqlite3 $s '.read $OUT/sql/floor-$kind-selected.sql'"
  local list_cmd="$ADB --db $s list --all-over $THRESHOLD --idle 0 --json"
  local floor_cmd="sqlite3 $s '.read $OUT/sql/floor-$kind.sql'"
  # Same id sets first: --ids and its floor, --json's listed ids and theirs.
  $ids_cmd >"$OUT/raw/$k.agent-db.ids" 2>/dev/null
  sqlite3 "$s" ".read $OUT/sql/floor-$kind-selected.sql" >"$OUT/raw/$k.floor-selected.txt"
  $list_cmd >"$OUT/raw/$k.agent-db.json"
  sqlite3 "$s" ".read $OUT/sql/floor-$kind.sql" >"$OUT/raw/$k.floor.txt"
  read -r rows_adb selected rows_floor same same_ids < <(py '
import json, sys
lines = lambda p: [l for l in open(p).read().split("\n") if l]
a = json.load(open(sys.argv[1]))["conversations"]
ids = [r["id"] for r in a]
sel = [r["id"] for r in a if r["status"] == "selected"]
floor = lines(sys.argv[2])
print(len(ids), len(sel), len(floor), int(sorted(ids) == sorted(floor)),
      int(lines(sys.argv[3]) == sel and sorted(sel) == sorted(lines(sys.argv[4]))))' \
    "$OUT/raw/$k.agent-db.json" "$OUT/raw/$k.floor.txt" "$OUT/raw/$k.agent-db.ids" "$OUT/raw/$k.floor-selected.txt")
  result "$k.rows.agent_db" "$rows_adb"
  result "$k.rows.agent_db_selected" "$selected"
  result "$k.rows.floor" "$rows_floor"
  result "$k.same_id_set" "$same_ids"
  result "$k.json.same_id_set" "$same"
  ((same_ids)) || echo "WARNING: $k: list --ids and the floor return different id sets" >&2
  ((same)) || echo "WARNING: $k: list --json and its floor return different id sets" >&2
  # Warm: the first (warmup) runs bring the pages both read into the page cache.
  time_group "$k.warm" "$LIST_RUNS" 2 -- agent-db "$ids_cmd" floor "$sel_cmd" \
    agent-db-json "$list_cmd" floor-listed "$floor_cmd"
  for l in agent-db floor agent-db-json floor-listed; do
    read -r m mean mn r c <<<"${TIMES[$l]}"
    result "$k.warm.$l.median_s" "$m"; result "$k.warm.$l.min_s" "$mn"
    result "$k.warm.$l.runs" "$r"; result "$k.warm.$l.cpu_s" "$c"
  done
  result "$k.warm.ratio_wall" "$(ratio "$(med agent-db)" "$(med floor)")"
  result "$k.warm.ratio_cpu" "$(ratio "$(cpu agent-db)" "$(cpu floor)")"
  result "$k.warm.json_ratio_wall" "$(ratio "$(med agent-db-json)" "$(med floor-listed)")"
  result "$k.warm.json_ratio_cpu" "$(ratio "$(cpu agent-db-json)" "$(cpu floor-listed)")"
  # Cold: the store's pages are evicted before every run.
  PREPARE="python3 $ROOT/benches/pagecache.py evict $s $s-wal" \
    time_group "$k.cold" "$COLD_RUNS" 0 -- agent-db "$ids_cmd" floor "$sel_cmd"
  for l in agent-db floor; do
    read -r m mean mn r c <<<"${TIMES[$l]}"
    result "$k.cold.$l.median_s" "$m"; result "$k.cold.$l.runs" "$r"; result "$k.cold.$l.cpu_s" "$c"
  done
  result "$k.cold.ratio_wall" "$(ratio "$(med agent-db)" "$(med floor)")"
  result "$k.cold.ratio_cpu" "$(ratio "$(cpu agent-db)" "$(cpu floor)")"
}

# goose: a sessions.db of the newest schema agent-db knows (v17). Utilization is
# total_tokens over model_config_json's context_limit when positive, else the model's window by
# agent-db's table (longest matching prefix), else goose's 128,000; a NULL total_tokens is
# reported as skipped, so in the set. Every session is listed. One pass over sessions, no
# json_valid or type checks (the fastest of the variants tried that returns the same id set on
# these stores; agent-db also copes with invalid JSON and non-integer limits).
cat >"$OUT/sql/floor-goose.sql" <<SQL
SELECT id FROM sessions WHERE total_tokens IS NULL OR total_tokens >= $THRESHOLD * COALESCE(
  NULLIF(model_config_json ->> '\$.context_limit', 0),
  (SELECT $LIMIT_CASE FROM (SELECT lower(model_config_json ->> '\$.model_name') AS m)),
  128000);
SQL
# opencode: per session the newest finished assistant message (newest first on
# message_session_time_created_id_idx, one row), its context (tokens.total, else input +
# output + cache; a summary's output), over the window of its modelID by agent-db's table;
# unknown model or no finished assistant = reported as skipped, so in the set.
# The window agent-db rates an opencode session against is the input opencode's overflow rule
# allows (src/store/opencode/limits.rs, read here): a separate input limit less min(20,000, the
# output cap), else the window less the output cap (the output limit, at most 32,000); 0 or less
# = unknown.
USABLE_CASE=$(py '
import re
src = open("src/store/opencode/limits.rs").read().split("#[cfg(test)]")[0]
rows = re.findall(r"\(\"([^\"]+)\", (None|Some\(([0-9_]+)\)), ([0-9_]+)\)", src)
rows.sort(key=lambda r: -len(r[0]))
def cap(o):
    o = min(int(o.replace("_", "")), 32000)
    return o or 32000
arms = []
for p, _, inp, out in rows:
    c = cap(out)
    v = f"{int(inp.replace(chr(95), str())) - min(c, 20000)}" if inp else f"lim - {c}"
    arms.append(f"WHEN m LIKE \x27{p}%\x27 THEN {v}")
print("CASE " + " ".join(arms) + " ELSE lim - 32000 END")')
cat >"$OUT/sql/floor-opencode.sql" <<SQL
WITH r AS MATERIALIZED (
  SELECT s.id AS id,
    (SELECT m.data FROM message m WHERE m.session_id = s.id
       AND m.data ->> '\$.role' = 'assistant' AND m.data ->> '\$.finish' IS NOT NULL
     ORDER BY m.time_created DESC, m.id DESC LIMIT 1) AS d
  FROM session s),
x AS MATERIALIZED (
  SELECT id, lower(d ->> '\$.modelID') AS m,
    CASE WHEN d IS NULL THEN NULL
         WHEN d ->> '\$.summary' = 1 THEN d ->> '\$.tokens.output'
         WHEN IFNULL(d ->> '\$.tokens.total', 0) > 0 THEN d ->> '\$.tokens.total'
         ELSE IFNULL(d ->> '\$.tokens.input', 0) + IFNULL(d ->> '\$.tokens.output', 0)
            + IFNULL(d ->> '\$.tokens.cache.read', 0) + IFNULL(d ->> '\$.tokens.cache.write', 0) END AS cur
  FROM r)
SELECT id FROM (SELECT id, cur, CASE WHEN lim > 0 THEN NULLIF(MAX($USABLE_CASE, 0), 0) END AS lim
  FROM (SELECT id, m, cur, $LIMIT_CASE AS lim FROM x))
WHERE lim IS NULL OR cur IS NULL OR CAST(cur AS REAL) / lim >= $THRESHOLD;
SQL

sed 's|WHERE lim IS NULL OR cur IS NULL OR CAST|WHERE CAST|' "$OUT/sql/floor-opencode.sql" \
  >"$OUT/sql/floor-opencode-selected.sql"
# goose: a session whose provider manages its own context is left to goose (skipped), the
# providers read from src/store/goose/read.rs.
MANAGED=$(py '
import re
src = open("src/store/goose/read.rs").read()
block = src.split("MANAGES_OWN_CONTEXT")[1].split("];")[0]
print(", ".join(f"\x27{p}\x27" for p in re.findall(r"\"([^\"]+)\"", block)))')
sed -e 's|WHERE total_tokens IS NULL OR total_tokens >=|WHERE total_tokens >=|' \
  -e "s|128000);|128000) AND IFNULL(CAST(provider_name AS TEXT), '') NOT IN ($MANAGED);|" \
  "$OUT/sql/floor-goose.sql" >"$OUT/sql/floor-goose-selected.sql"

# The grid: one store per agent and fraction, generated, measured (P1, and RSS on kodelet's),
# then deleted, so at most one P1 store is on disk at a time.
log "P1. list --all-over $THRESHOLD vs the sqlite3 floor: ${P1_AGENTS[*]} x ${P1_FRACTIONS[*]}, $P1_N conversations, shape $P1_SHAPE"
for agent in "${P1_AGENTS[@]}"; do
  case $agent in
    kodelet) gkind=kodelet ;;
    docker-agent) gkind=docker-agent-modern ;;
    goose) gkind=goose-v17 ;;
    opencode) gkind=opencode ;;
    *) die "BENCH_P1_AGENTS: unknown agent $agent (kodelet, docker-agent, goose, opencode)" ;;
  esac
  for f in "${P1_FRACTIONS[@]}"; do
    cell="$agent.$f"
    s=$(store "$gkind" "$P1_N" - "$f" "$P1_SHAPE")
    result "store.$cell.path" "$s"
    result "store.$cell.file_mb" "$(file_mb "$s")"
    result "store.$cell.gen_s" "$(cat "$s.gen_s" 2>/dev/null || echo nan)"
    result "store.$cell.gen_log" "$(cat "$s.gen.log" 2>/dev/null | tr '\n' ' ')"
    p1 "$agent" "$f" "$s"
    if [[ $agent == kodelet ]]; then
      result "rss.kodelet.$f.list_kb" "$(peak_rss_kb "$ADB" --db "$s" list --all-over "$THRESHOLD" --idle 0 --json)"
    fi
    if [[ $agent == kodelet && $P1_DRY_RUN == 1 ]]; then
      result "rss.kodelet.$f.dry_run_kb" "$(RSS_STDOUT="$OUT/raw/dry-$f.json" peak_rss_kb \
        "$ADB" --db "$s" compact --all-over "$THRESHOLD" --idle 0 --dry-run --json)"
      result "rss.kodelet.$f.dry_run_planned" "$(py 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["planned"])' "$OUT/raw/dry-$f.json")"
    fi
    drop_store "$s"
  done
done

if [[ "$ONLY_P1" != 1 ]]; then # P2, P3 and P4 (not indented)
# ---------------------------------------------------------------------------------------------
if [[ "$SKIP_LLM" != 1 ]]; then
  log "P2. LLM batch vs its latency floor (benches/llm.sh)"
  BENCH_LLM_STORE="$BATCH" BENCH_LLM_DIAG=${BENCH_LLM_DIAG:-0} bash benches/llm.sh >&2
  sed 's/^/p2./' "$OUT/llm/results.txt" >>"$RESULTS"
fi

# ---------------------------------------------------------------------------------------------
log "P3. token counting: agent-db (bpe-openai) vs Python tiktoken"
CORPUS="$OUT/corpus-batch.nul"
read -r centries cbytes cmb < <(python3 benches/extract_corpus.py "$BATCH" "$CORPUS" | sed 's/[a-zA-Z]*=//g')
result p3.corpus "raw_messages of the 1,000-conversation store, NUL-separated"
result p3.corpus_entries "$centries"
result p3.corpus_mb "$cmb"
VENV="$OUT/venv"
if ! "$VENV/bin/python" -c 'import tiktoken' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check tiktoken
fi
# tiktoken downloads o200k_base.tiktoken unless it is cached under TIKTOKEN_CACHE_DIR/sha1(url).
# Write it from the vocabulary compiled into bpe-openai and check the sha256 tiktoken expects.
URL=https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken
KEY=$(printf '%s' "$URL" | sha1sum | cut -d' ' -f1)
EXPECTED=$("$VENV/bin/python" -c '
import inspect, re, tiktoken_ext.openai_public as p
m = re.search(r"expected_hash=\"([0-9a-f]{64})\"", inspect.getsource(p.o200k_base))
print(m.group(1) if m else "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")')
"$COUNT" --dump-tiktoken "$OUT/tiktoken-cache/$KEY"
GOT=$(sha256sum "$OUT/tiktoken-cache/$KEY" | cut -d' ' -f1)
[[ "$GOT" == "$EXPECTED" ]] || die "vocabulary from bpe-openai has sha256 $GOT, tiktoken expects $EXPECTED"
result p3.vocab_sha256 "$GOT (matches tiktoken's expected hash)"
result p3.tiktoken "$("$VENV/bin/python" -c 'import tiktoken; print(tiktoken.__version__)')"
run_py() {
  TIKTOKEN_CACHE_DIR="$OUT/tiktoken-cache" HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 \
    "$VENV/bin/python" benches/tiktoken_count.py "$CORPUS"
}
: >"$OUT/raw/tokens.txt"
for ((i = 0; i < TOKEN_RUNS; i++)); do # interleaved, so noise hits both sides alike
  "$COUNT" "$CORPUS" | sed 's/^/rust /' | tee -a "$OUT/raw/tokens.txt" >&2
  run_py | sed 's/^/python /' | tee -a "$OUT/raw/tokens.txt" >&2
done
read -r rs_mbs rs_tok py_mbs py_tok < <(py '
import statistics, sys
rows = {"rust": [], "python": []}
for line in open(sys.argv[1]):
    side, *kv = line.split()
    rows[side].append(dict(x.split("=", 1) for x in kv))
out = []
for side in ("rust", "python"):
    r = rows[side]
    totals = {x["tokens"] for x in r}
    mbs = statistics.median(float(x["mb_per_s"]) for x in r)
    out += [f"{mbs:.3f}", totals.pop() if len(totals) == 1 else "inconsistent"]
print(*out)' "$OUT/raw/tokens.txt")
result p3.runs_each "$TOKEN_RUNS"
result p3.rust.mb_per_s "$rs_mbs"
result p3.rust.total "$rs_tok"
result p3.python.mb_per_s "$py_mbs"
result p3.python.total "$py_tok"
result p3.ratio "$(ratio "$rs_mbs" "$py_mbs")"
result p3.totals_identical "$([[ "$rs_tok" == "$py_tok" ]] && echo 1 || echo 0)"

# ---------------------------------------------------------------------------------------------
log "P4. offline (extractive) batch, --jobs 1 vs --jobs 2"
p4_run() { # p4_run JOBS I: one timed extractive compaction of a fresh copy
  local jobs=$1 i=$2 work="$OUT/p4/store.db" raw="$OUT/raw/p4-j$1-$2"
  rm -f "$work" "$work-wal" "$work-shm" "$work.agent-db.lock"
  cp "$BATCH" "$work"
  python3 "$ROOT/benches/pagecache.py" warm "$work"
  local t0 t1
  t0=$(date +%s.%N)
  (cd "$OUT/p4" && env -u AGENT_DB_CONFIG -u AGENT_DB_PATH -u AGENT_DB_CONCURRENCY XDG_CONFIG_HOME="$OUT/p4" \
    AGENT_DB_NOW="$NOW" /usr/bin/time -v "$ADB" --db "$work" compact --all-over 0 --idle 0 \
    --keep-tokens "$P4_KEEP" --strategy extractive --jobs "$jobs" --yes --quiet --json >"$raw.json" 2>"$raw.time")
  t1=$(date +%s.%N)
  py '
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
tv = dict(l.strip().rsplit(": ", 1) for l in open(sys.argv[2]) if ": " in l)
cpu = float(tv["User time (seconds)"]) + float(tv["System time (seconds)"])
rss, wall = tv["Maximum resident set size (kbytes)"], float(sys.argv[4]) - float(sys.argv[3])
print(f"{wall:.3f} {cpu:.2f}", rss, t["compacted"], t["failed"])' \
    "$raw.json" "$raw.time" "$t0" "$t1"
}
: >"$OUT/raw/p4.txt"
for ((i = 0; i < P4_RUNS; i++)); do
  for j in 1 2; do
    ((i % 2)) && j=$((3 - j))
    echo "$j $(p4_run "$j" "$i")" | tee -a "$OUT/raw/p4.txt" >&2
  done
done
read -r j1 j2 c1 c2 comp1 comp2 fail rss < <(py '
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(j, k): return statistics.median(float(r[k]) for r in rows if r[0] == j)
comp = lambda j: ",".join(sorted({r[4] for r in rows if r[0] == j}))
w1, w2, c1, c2 = med("1", 1), med("2", 1), med("1", 2), med("2", 2)
print(f"{w1:.3f} {w2:.3f} {c1:.2f} {c2:.2f}", comp("1"), comp("2"),
      sum(int(r[5]) for r in rows), max(int(r[3]) for r in rows))' "$OUT/raw/p4.txt")
result p4.runs_each "$P4_RUNS"
result p4.jobs1.median_s "$j1"
result p4.jobs2.median_s "$j2"
result p4.jobs1.cpu_s "$c1"
result p4.jobs2.cpu_s "$c2"
result p4.compacted "jobs1=$comp1 jobs2=$comp2"
result p4.failed "$fail"
result p4.peak_rss_kb "$rss"
result p4.speedup "$(ratio "$j1" "$j2")"
if [[ "$P4_PERF" == 1 ]] && command -v perf >/dev/null; then
  log "P4 diagnostic: CPU per thread of a --jobs 2 run (perf; untimed)"
  work="$OUT/p4/store.db"
  rm -f "$work" "$work-wal" "$work-shm" "$work.agent-db.lock"
  cp "$BATCH" "$work"
  (cd "$OUT/p4" && env -u AGENT_DB_CONFIG -u AGENT_DB_PATH -u AGENT_DB_CONCURRENCY XDG_CONFIG_HOME="$OUT/p4" \
    AGENT_DB_NOW="$NOW" perf record -q -o "$OUT/raw/p4.perf.data" -- "$ADB" --db "$work" compact \
    --all-over 0 --idle 0 --keep-tokens "$P4_KEEP" --strategy extractive --jobs 2 --yes --quiet \
    --json >/dev/null 2>"$OUT/raw/p4.perf.err") || true
  if [[ -f "$OUT/raw/p4.perf.data" ]]; then
    python3 "$ROOT/benches/perf_threads.py" "$OUT/raw/p4.perf.data" p4 | tee "$OUT/raw/p4.perf.json" >&2
    while IFS='=' read -r k v; do result "p4.perf.$k" "$v"; done < <(py '
import json, sys
for k, v in json.load(open(sys.argv[1])).items():
    if k != "label":
        print(f"{k}={v}")' "$OUT/raw/p4.perf.json")
  fi
fi

fi # ONLY_P1

result machine.loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
result finished_at "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# ---------------------------------------------------------------------------------------------
log "summary (bench-out/results.txt has every figure)"
get() { awk -F= -v k="$1" '$1 == k {sub(/^[^=]*=/, ""); print; exit}' "$RESULTS"; }
{
  printf 'figure\tmeasured\tbaseline\tratio\tgoal\n'
  for agent in "${P1_AGENTS[@]}"; do
    for f in "${P1_FRACTIONS[@]}"; do
      k="p1.$agent.$f"
      for c in warm cold; do
        printf 'P1 %s %s%% selected %s wall s (same ids=%s, %s selected)\t%s\t%s\t%s\t<=1.2\n' "$agent" \
          "$(py "print(round($f * 100))")" "$c" "$(get "$k.same_id_set")" "$(get "$k.rows.agent_db_selected")" \
          "$(get "$k.$c.agent-db.median_s")" "$(get "$k.$c.floor.median_s")" "$(get "$k.$c.ratio_wall")"
        printf 'P1 %s %s%% selected %s CPU s\t%s\t%s\t%s\t<=1.2\n' "$agent" "$(py "print(round($f * 100))")" "$c" \
          "$(get "$k.$c.agent-db.cpu_s")" "$(get "$k.$c.floor.cpu_s")" "$(get "$k.$c.ratio_cpu")"
      done
      printf 'P1 %s %s%% --json warm CPU s (same ids=%s)\t%s\t%s\t%s\t-\n' "$agent" "$(py "print(round($f * 100))")" \
        "$(get "$k.json.same_id_set")" "$(get "$k.warm.agent-db-json.cpu_s")" "$(get "$k.warm.floor-listed.cpu_s")" \
        "$(get "$k.warm.json_ratio_cpu")"
    done
  done
  if [[ " ${P1_AGENTS[*]} " == *" kodelet "* ]]; then
    for f in "${P1_FRACTIONS[@]}"; do
      printf 'RSS KB compact --dry-run, kodelet %s%% selected\t%s\t-\t-\t<=102400\n' "$(py "print(round($f * 100))")" "$(get "rss.kodelet.$f.dry_run_kb")"
    done
  fi
  [[ "$ONLY_P1" == 1 ]] && exit 0
  if [[ "$SKIP_LLM" != 1 ]]; then
    printf 'P2 LLM batch wall / (N*L/C) (N=%s, max in flight %s)\t-\t-\t%s\t<=1.15\n' \
      "$(get p2.requests)" "$(get p2.run1.max_in_flight)" "$(get p2.ratio_median)"
    printf 'P2 peak RSS KB\t%s\t-\t-\t<=102400\n' "$(get p2.peak_rss_kb_max)"
  fi
  printf 'P3 tokens MB/s agent-db/tiktoken (identical totals=%s)\t%s\t%s\t%s\t>=1.5\n' \
    "$(get p3.totals_identical)" "$rs_mbs" "$py_mbs" "$(get p3.ratio)"
  printf 'P4 extractive batch s, jobs 1 / jobs 2\t%s\t%s\t%s\t>=1.6\n' "$j2" "$j1" "$(get p4.speedup)"
} | column -t -s $'\t'
