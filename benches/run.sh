#!/usr/bin/env bash
# agent-db benchmarks (docs/benchmarks.md). Run from anywhere: `bash benches/run.sh`.
#
#   a. `agent-db list --all-over 0.7 --idle 0 --json` against the sqlite3 CLI running the
#      equivalent query (same rows, same fields, as JSON) and a naive query on
#      conversations.usage; checks that the outputs hold the same rows. Warm page cache, at
#      --all-over 0.7 and at a low threshold that selects rows at the generated scale.
#  a2. the same list, cold page cache (first store), with the bare listing query and a
#      summaries-driven variant of it for comparison.
#   b. peak RSS of that list command and of `compact --all-over 0.7 --idle 0 --dry-run --json`
#      on every store size (it must not grow with the store).
#   c. o200k_base token counting: agent_db::tokens::count_text (examples/count_tokens.rs)
#      against Python tiktoken's encode_ordinary, single thread, on the raw_messages of the
#      first store; checks that the token totals are identical.
#
# Everything goes under bench-out/ (gitignored): stores, SQL, raw outputs, the tiktoken venv and
# results.txt (key=value lines). Knobs (environment):
#   BENCH_SIZES="10000 100000"  store sizes (conversations); the first one is the token corpus
#   BENCH_SCALE=0.1             gen_store --scale (message-count multiplier) for every store
#   BENCH_SEED=1                gen_store --seed
#   BENCH_LOW_THRESHOLD=0.2     second --all-over threshold (see THRESHOLDS below)
#   BENCH_REUSE=0               1: keep a store generated earlier with the same parameters
#   BENCH_LIST_RUNS=20          timed runs per list command on stores up to 10k conversations
#   BENCH_LIST_RUNS_LARGE=8     the same on larger stores
#   BENCH_COLD_RUNS=3           timed cold-cache runs per command (first store only)
#   BENCH_NAIVE_RUNS=3          timed runs of the naive query
#   BENCH_TOKEN_RUNS=3          interleaved runs of each tokenizer
#   BENCH_NO_HYPERFINE=1        force the bash-loop fallback even when hyperfine is installed
# Needs: cargo, sqlite3, python3 (with venv + pip reaching PyPI once, for tiktoken),
# /usr/bin/time (GNU time; a Python getrusage fallback is used without it), hyperfine (optional).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT="$ROOT/bench-out"
SIZES=(${BENCH_SIZES:-10000 100000})
SCALE=${BENCH_SCALE:-0.1}
SEED=${BENCH_SEED:-1}
REUSE=${BENCH_REUSE:-0}
LIST_RUNS=${BENCH_LIST_RUNS:-20}
LIST_RUNS_LARGE=${BENCH_LIST_RUNS_LARGE:-8}
COLD_RUNS=${BENCH_COLD_RUNS:-3}
NAIVE_RUNS=${BENCH_NAIVE_RUNS:-3}
TOKEN_RUNS=${BENCH_TOKEN_RUNS:-3}
# --all-over thresholds: 0.7 (the headline command) and a low one. Utilization in generated
# stores scales with --scale (currentContextWindow ~ bytes/4): at scale 0.1 no conversation
# reaches 0.7, so the low threshold (default 0.2: ~1.6% of conversations at scale 0.1, as 0.7
# selects ~2% at scale 1) exercises the "selected" path of list and the planning of compact.
THRESHOLDS=(0.7 ${BENCH_LOW_THRESHOLD:-0.2})
RESULTS="$OUT/results.txt"
rm -rf "$OUT/raw" # per-run outputs; stores, venv and the vocabulary cache are kept
mkdir -p "$OUT"/{bin,stores,sql,raw,tiktoken-cache}

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'benches/run.sh: error: %s\n' "$*" >&2; exit 1; }
result() { printf '%s=%s\n' "$1" "$2" >>"$RESULTS"; }
# Python one-liner helper for arithmetic and JSON.
py() { python3 -c "$@"; }

for tool in cargo sqlite3 python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
if [[ -z "${BENCH_NO_HYPERFINE:-}" ]] && command -v hyperfine >/dev/null; then
  HYPERFINE=1
else
  HYPERFINE=0
fi
GNU_TIME=0
if /usr/bin/time -v true >/dev/null 2>&1; then GNU_TIME=1; fi

: >"$RESULTS"
result started_at "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# ---------------------------------------------------------------------------------------------
log "build (release)"
cargo build --release --examples --bins
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  py 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
# The target dir may be shared with concurrent builds: benchmark private copies.
for b in agent-db examples/gen_store examples/count_tokens; do
  cp "$TARGET_DIR/release/$b" "$OUT/bin/$(basename "$b")"
done
ADB="$OUT/bin/agent-db"
GEN="$OUT/bin/gen_store"
COUNT="$OUT/bin/count_tokens"

# ---------------------------------------------------------------------------------------------
log "machine"
result machine.nproc "$(nproc)"
result machine.mem_total_mb "$(awk '/MemTotal/ {printf "%d", $2/1024}' /proc/meminfo)"
result machine.cpu "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
result machine.loadavg_start "$(cut -d' ' -f1-3 /proc/loadavg)"
result machine.rustc "$(rustc --version)"
result machine.sqlite3_cli "$(sqlite3 --version | cut -d' ' -f1-2)"
BUNDLED=$(awk '/name = "libsqlite3-sys"/ {getline; gsub(/"/, "", $3); print $3; exit}' Cargo.lock)
BUNDLED_H=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/libsqlite3-sys-"$BUNDLED"/sqlite3/sqlite3.h 2>/dev/null | head -1 || true)
result machine.agent_db_sqlite "$([[ -n "$BUNDLED_H" ]] && awk '/#define SQLITE_VERSION / {gsub(/"/, "", $3); print $3; exit}' "$BUNDLED_H") (bundled by libsqlite3-sys $BUNDLED)"
result machine.python "$(python3 --version)"
result machine.hyperfine "$( ((HYPERFINE)) && hyperfine --version || echo 'absent: bash-loop median')"
result machine.git "$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+dirty')"

# ---------------------------------------------------------------------------------------------
log "stores (scale $SCALE, seed $SEED)"
declare -A STORE
for n in "${SIZES[@]}"; do
  s="$OUT/stores/kodelet-$n-s$SCALE-seed$SEED.db"
  stamp="$s.params"
  want="conversations=$n seed=$SEED scale=$SCALE gen=$(sha1sum "$GEN" | cut -c1-12)"
  if [[ "$REUSE" == 1 && -f "$s" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "reusing $s" >&2
    gen_s=$(cat "$s.gen_s" 2>/dev/null || echo nan)
    raw_mb=$(cat "$s.raw_mb" 2>/dev/null || echo nan)
  else
    rm -f "$stamp"
    t0=$(date +%s.%N)
    "$GEN" --conversations "$n" --seed "$SEED" --scale "$SCALE" --out "$s" --force 2>"$OUT/raw/gen-$n.log"
    t1=$(date +%s.%N)
    cat "$OUT/raw/gen-$n.log" >&2
    gen_s=$(py "print(f'{$t1-$t0:.1f}')")
    raw_mb=$(sed -n 's/.*(\([0-9.]*\) MB raw_messages).*/\1/p' "$OUT/raw/gen-$n.log")
    echo "$gen_s" >"$s.gen_s"; echo "$raw_mb" >"$s.raw_mb"; echo "$want" >"$stamp"
  fi
  STORE[$n]=$s
  rows=$(sqlite3 "$s" 'SELECT count(*) FROM conversations')
  mb=$(py 'import os, sys; print(f"{sum(os.path.getsize(p) for p in sys.argv[1:] if os.path.exists(p)) / 1e6:.1f}")' "$s" "$s-wal")
  result "store.$n.path" "$s"
  result "store.$n.conversations" "$rows"
  result "store.$n.scale" "$SCALE"
  result "store.$n.file_mb" "$mb"
  result "store.$n.raw_messages_mb" "$raw_mb"
  result "store.$n.gen_s" "$gen_s"
done

# ---------------------------------------------------------------------------------------------
# The sqlite3 side of benchmark (a).
#
# equiv.sql: what agent-db's list reads (src/store/kodelet.rs LIST_SQL: conversations joined to
# conversation_summaries by id, small columns only, ordered by updated_at) and what it prints
# (src/commands/list.rs JsonRow), filtered in SQL: the rows agent-db emits are those with
# utilization >= 0.7 ("selected") plus those whose utilization cannot be computed because the
# stored currentContextWindow is missing or maxContextWindow is 0/missing ("skipped").
cat >"$OUT/sql/equiv.sql.in" <<'SQL'
SELECT c.id AS id,
  CASE WHEN s.id IS NULL THEN c.summary ELSE s.summary END AS name,
  COALESCE(s.provider, c.provider) AS provider,
  CASE COALESCE(s.provider, c.provider)
    WHEN 'anthropic' THEN 'anthropic'
    WHEN 'openai-responses' THEN 'openai-responses'
    WHEN 'openai' THEN
      CASE COALESCE(json_extract(CASE WHEN s.id IS NULL THEN c.metadata ELSE s.metadata END, '$.api_mode'), '')
        WHEN 'responses' THEN 'openai-responses'
        WHEN 'chat_completions' THEN 'openai-chat'
        WHEN '' THEN 'openai-chat'
      END
  END AS format,
  json_extract(CASE WHEN s.id IS NULL THEN c.metadata ELSE s.metadata END, '$.model') AS model,
  s.message_count AS messages,
  json_extract(COALESCE(s.usage, c.usage), '$.currentContextWindow') AS context_tokens,
  json_extract(COALESCE(s.usage, c.usage), '$.maxContextWindow') AS max_context_tokens,
  CASE WHEN json_extract(COALESCE(s.usage, c.usage), '$.maxContextWindow') > 0 THEN
    round(json_extract(COALESCE(s.usage, c.usage), '$.currentContextWindow') * 1.0
          / json_extract(COALESCE(s.usage, c.usage), '$.maxContextWindow'), 4)
  END AS utilization,
  COALESCE(s.created_at, c.created_at) AS created_at,
  c.updated_at AS updated_at,
  CASE WHEN json_extract(COALESCE(s.usage, c.usage), '$.currentContextWindow') IS NULL
         OR IFNULL(json_extract(COALESCE(s.usage, c.usage), '$.maxContextWindow'), 0) <= 0
       THEN 'skipped' ELSE 'selected' END AS status
FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id
WHERE json_extract(COALESCE(s.usage, c.usage), '$.currentContextWindow') IS NULL
   OR IFNULL(json_extract(COALESCE(s.usage, c.usage), '$.maxContextWindow'), 0) <= 0
   OR json_extract(COALESCE(s.usage, c.usage), '$.currentContextWindow') * 1.0
      / json_extract(COALESCE(s.usage, c.usage), '$.maxContextWindow') >= @THRESHOLD@
ORDER BY c.updated_at DESC;
SQL
# naive.sql: what a user types first: filter conversations.usage directly (no summaries table).
# usage is stored after raw_messages in each row, so SQLite walks every row's overflow chain.
cat >"$OUT/sql/naive.sql.in" <<'SQL'
SELECT id, summary AS name, provider,
  json_extract(metadata, '$.model') AS model,
  json_extract(usage, '$.currentContextWindow') AS context_tokens,
  json_extract(usage, '$.maxContextWindow') AS max_context_tokens,
  created_at, updated_at
FROM conversations
WHERE json_extract(usage, '$.currentContextWindow') * 1.0
      / json_extract(usage, '$.maxContextWindow') >= @THRESHOLD@
ORDER BY updated_at DESC;
SQL
for t in "${THRESHOLDS[@]}"; do
  sed "s/@THRESHOLD@/$t/" "$OUT/sql/equiv.sql.in" >"$OUT/sql/equiv-$t.sql"
  sed "s/@THRESHOLD@/$t/" "$OUT/sql/naive.sql.in" >"$OUT/sql/naive-$t.sql"
done

# ---------------------------------------------------------------------------------------------
# Timing helpers. TIMES[label] = "median_s mean_s min_s runs cpu_s": wall-clock median, mean and
# min over the timed runs, and the mean user+system CPU seconds per run. The machine is shared:
# wall time includes waiting for a core, CPU time mostly does not, so both are reported.
median_of() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m}'; }

# time_group NAME RUNS WARMUP -- label1 'cmd1' label2 'cmd2' ...: times the commands against
# each other; PREPARE (a plain command line), when set, runs untimed before every run. With hyperfine (-N, output to /dev/null): two passes in opposite command orders
# (ABBA), RUNS/2 runs each, merged, so a load change during the group hits every command alike;
# the JSON exports stay under raw/. Without it: a bash loop, WARMUP untimed runs, then RUNS
# rounds, each running every command once (alternating order), median taken.
declare -A TIMES
time_group() {
  local name=$1 runs=$2 warmup=$3; shift 4
  local labels=() cmds=() i
  while (($#)); do labels+=("$1"); cmds+=("$2"); shift 2; done
  if ((HYPERFINE)); then
    local n=${#cmds[@]} half=$(((runs + 1) / 2)) fwd=() rev=() jsons=()
    for ((i = 0; i < n; i++)); do fwd+=(-n "${labels[$i]}" "${cmds[$i]}"); done
    for ((i = n - 1; i >= 0; i--)); do rev+=(-n "${labels[$i]}" "${cmds[$i]}"); done
    if ((n == 1)); then half=$runs; fi
    local prep=()
    [[ -n "${PREPARE:-}" ]] && prep=(--prepare "$PREPARE")
    hyperfine -N --style basic --warmup "$warmup" --runs "$half" "${prep[@]}" \
      --export-json "$OUT/raw/$name.1.json" "${fwd[@]}" >&2
    jsons=("$OUT/raw/$name.1.json")
    if ((n > 1)); then
      hyperfine -N --style basic --warmup "$((warmup > 0 ? 1 : 0))" --runs "$half" "${prep[@]}" \
        --export-json "$OUT/raw/$name.2.json" "${rev[@]}" >&2
      jsons+=("$OUT/raw/$name.2.json")
    fi
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
    local r k order raw="$OUT/raw/$name.loop.txt"
    : >"$raw"
    for ((r = 0; r < warmup + runs; r++)); do
      order=("${!cmds[@]}")
      ((r % 2)) && order=($(printf '%s\n' "${order[@]}" | tac))
      for k in "${order[@]}"; do
        # shellcheck disable=SC2086
        [[ -n "${PREPARE:-}" ]] && $PREPARE >/dev/null
        local TIMEFORMAT="${labels[$k]} $r %R %U %S"
        # shellcheck disable=SC2086 # the command lines are plain words (paths without spaces)
        { eval "time ${cmds[$k]} >/dev/null"; } 2>>"$raw"
      done
    done
    while read -r label stats; do TIMES[$label]=$stats; done < <(py '
import statistics, sys
warmup = int(sys.argv[2])
acc = {}
for line in open(sys.argv[1]):
    label, r, real, user, sys_ = line.split()
    if int(r) < warmup:
        continue
    a = acc.setdefault(label, {"t": [], "cpu": []})
    a["t"].append(float(real)); a["cpu"].append(float(user) + float(sys_))
for label, a in acc.items():
    t, cpu = a["t"], statistics.mean(a["cpu"])
    print(label, f"{statistics.median(t):.6f} {statistics.mean(t):.6f} {min(t):.6f} {len(t)} {cpu:.6f}")' "$raw" "$warmup")
    for k in "${labels[@]}"; do echo "$k: median/mean/min/runs/cpu ${TIMES[$k]}" >&2; done
  fi
}
med() { echo "${TIMES[$1]}" | cut -d' ' -f1; }
cpu() { echo "${TIMES[$1]}" | cut -d' ' -f5; }
ratio() { py "print(f'{$1/$2:.3f}')"; }

# peak RSS (KB) of one run, stdout discarded.
peak_rss_kb() {
  if ((GNU_TIME)); then
    /usr/bin/time -v "$@" 2>"$OUT/raw/time.err" >"${RSS_STDOUT:-/dev/null}" || { cat "$OUT/raw/time.err" >&2; return 1; }
    awk -F': ' '/Maximum resident set size/ {print $2}' "$OUT/raw/time.err"
  else
    py '
import os, resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=open(os.environ.get("RSS_STDOUT", os.devnull), "wb"), check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
  fi
}
# median peak RSS of 3 runs
rss3() { local i; for i in 1 2 3; do peak_rss_kb "$@"; done | median_of; }

# ---------------------------------------------------------------------------------------------
log "a. list vs sqlite3"
for n in "${SIZES[@]}"; do
  s=${STORE[$n]}
  for t in "${THRESHOLDS[@]}"; do
    k="list.$n.at$t"
    # Correctness first: same rows, same order, same fields.
    "$ADB" --db "$s" list --all-over "$t" --idle 0 --json >"$OUT/raw/$k.agent-db.json"
    sqlite3 -json "$s" ".read $OUT/sql/equiv-$t.sql" >"$OUT/raw/$k.sqlite3.json"
    sqlite3 -json "$s" ".read $OUT/sql/naive-$t.sql" >"$OUT/raw/$k.naive.json"
    check=$(py '
import json, sys
a = json.load(open(sys.argv[1]))["conversations"]
def load(p):
    t = open(p).read().strip()
    return json.loads(t) if t else []
b, c = load(sys.argv[2]), load(sys.argv[3])
fields = ["id", "name", "provider", "format", "model", "messages", "context_tokens",
          "max_context_tokens", "utilization", "updated_at", "status"]
diff = sum(1 for x, y in zip(a, b) for f in fields if x.get(f) != y.get(f))
sel = [r["id"] for r in a if r["status"] == "selected"]
print(len(a), len(sel), len(a) - len(sel), len(b), len(c),
      int(len(a) == len(b) and diff == 0),
      int(sorted(sel) == sorted(r["id"] for r in c)), diff)' \
      "$OUT/raw/$k.agent-db.json" "$OUT/raw/$k.sqlite3.json" "$OUT/raw/$k.naive.json")
    read -r rows_adb selected skipped rows_sql rows_naive same_rows naive_same diff <<<"$check"
    result "$k.rows.agent_db" "$rows_adb"
    result "$k.rows.agent_db_selected" "$selected"
    result "$k.rows.agent_db_skipped" "$skipped"
    result "$k.rows.sqlite3" "$rows_sql"
    result "$k.rows.naive" "$rows_naive"
    result "$k.rows_identical" "$same_rows"
    result "$k.naive_matches_selected" "$naive_same"
    ((same_rows)) || echo "WARNING: agent-db and sqlite3 rows differ ($k: $diff field differences)" >&2
    ((naive_same)) || echo "WARNING: naive rows differ from agent-db's selected rows ($k)" >&2

    runs=$LIST_RUNS
    ((n > 10000)) && runs=$LIST_RUNS_LARGE
    groups=(agent-db "$ADB --db $s list --all-over $t --idle 0 --json"
      sqlite3 "sqlite3 -json $s '.read $OUT/sql/equiv-$t.sql'")
    # Warm page cache: the whole store file is read through before every run (this VM's page
    # cache is not reliably kept between runs), so both sides are timed CPU-bound.
    PREPARE="python3 $ROOT/benches/pagecache.py warm $s" time_group "$k" "$runs" 2 -- "${groups[@]}"
    labels=(agent-db sqlite3)
    if [[ "$t" == "${THRESHOLDS[0]}" ]]; then
      # The naive query reads every row in full whatever the threshold: time it once.
      PREPARE="python3 $ROOT/benches/pagecache.py warm $s" \
        time_group "$k.naive" "$NAIVE_RUNS" 1 -- naive "sqlite3 -json $s '.read $OUT/sql/naive-$t.sql'"
      labels+=(naive)
    fi
    for l in "${labels[@]}"; do
      read -r m mean mn r c <<<"${TIMES[$l]}"
      result "$k.$l.median_s" "$m"
      result "$k.$l.mean_s" "$mean"
      result "$k.$l.min_s" "$mn"
      result "$k.$l.runs" "$r"
      result "$k.$l.cpu_s" "$c"
    done
    result "$k.ratio_agent_db_over_sqlite3" "$(ratio "$(med agent-db)" "$(med sqlite3)")"
    result "$k.cpu_ratio_agent_db_over_sqlite3" "$(ratio "$(cpu agent-db)" "$(cpu sqlite3)")"
    if [[ "$t" == "${THRESHOLDS[0]}" ]]; then
      result "$k.ratio_agent_db_over_naive" "$(ratio "$(med agent-db)" "$(med naive)")"
      result "$k.cpu_ratio_agent_db_over_naive" "$(ratio "$(cpu agent-db)" "$(cpu naive)")"
    fi
  done
done

# ---------------------------------------------------------------------------------------------
# Cold page cache, first store only: the store's pages are evicted before every run, so the
# access pattern of the query shows. Besides agent-db and the equivalent sqlite3 query, the bare
# listing query (LIST_SQL, no JSON) and the same rows driven from conversation_summaries
# (informational: it reads the big conversations table only through its covering primary-key
# index), both checked to print the same rows in the same order.
n=${SIZES[0]}
s=${STORE[$n]}
t=${THRESHOLDS[0]}
log "a2. list, cold page cache ($n)"
cat >"$OUT/sql/list_sql.sql" <<'SQL'
SELECT c.id,
  COALESCE(s.provider, c.provider),
  COALESCE(s.usage, c.usage),
  COALESCE(s.created_at, c.created_at),
  c.updated_at,
  CASE WHEN s.id IS NULL THEN c.summary ELSE s.summary END,
  CASE WHEN s.id IS NULL THEN c.metadata ELSE s.metadata END,
  s.message_count
FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id
ORDER BY c.updated_at DESC;
SQL
cat >"$OUT/sql/summaries_driven.sql" <<'SQL'
SELECT s.id, s.provider, s.usage, s.created_at, s.updated_at, s.summary, s.metadata, s.message_count
FROM conversation_summaries s
WHERE EXISTS (SELECT 1 FROM conversations c WHERE c.id = s.id)
UNION ALL
SELECT c.id, c.provider, c.usage, c.created_at, c.updated_at, c.summary, c.metadata, NULL
FROM conversations c INDEXED BY sqlite_autoindex_conversations_1
WHERE NOT EXISTS (SELECT 1 FROM conversation_summaries s WHERE s.id = c.id)
ORDER BY 5 DESC;
SQL
same_order=$( [[ "$(sqlite3 "$s" ".read $OUT/sql/list_sql.sql" | sha1sum)" == \
  "$(sqlite3 "$s" ".read $OUT/sql/summaries_driven.sql" | sha1sum)" ]] && echo 1 || echo 0)
result "cold.$n.summaries_driven_same_output" "$same_order"
for q in list_sql summaries_driven; do
  pages=$(sqlite3 "$s" ".stats on" ".read $OUT/sql/$q.sql" | awk -F: '/Page cache misses/ {gsub(/ /, "", $2); print $2}' | tail -1)
  result "cold.$n.$q.page_reads" "$pages"
done
PREPARE="python3 $ROOT/benches/pagecache.py evict $s $s-wal" time_group "cold-$n" "$COLD_RUNS" 0 -- \
  agent-db "$ADB --db $s list --all-over $t --idle 0 --json" \
  sqlite3 "sqlite3 -json $s '.read $OUT/sql/equiv-$t.sql'" \
  list_sql "sqlite3 $s '.read $OUT/sql/list_sql.sql'" \
  summaries_driven "sqlite3 $s '.read $OUT/sql/summaries_driven.sql'"
for l in agent-db sqlite3 list_sql summaries_driven; do
  read -r m mean mn r c <<<"${TIMES[$l]}"
  result "cold.$n.$l.median_s" "$m"
  result "cold.$n.$l.cpu_s" "$c"
  result "cold.$n.$l.runs" "$r"
done
result "cold.$n.ratio_agent_db_over_sqlite3" "$(ratio "$(med agent-db)" "$(med sqlite3)")"
result "cold.$n.ratio_list_sql_over_summaries_driven" "$(ratio "$(med list_sql)" "$(med summaries_driven)")"

# ---------------------------------------------------------------------------------------------
log "b. peak RSS"
for n in "${SIZES[@]}"; do
  s=${STORE[$n]}
  for t in "${THRESHOLDS[@]}"; do
    k="rss.$n.at$t"
    result "$k.list_kb" "$(rss3 "$ADB" --db "$s" list --all-over "$t" --idle 0 --json)"
    result "$k.sqlite3_equiv_kb" "$(rss3 sqlite3 -json "$s" ".read $OUT/sql/equiv-$t.sql")"
    t0=$(date +%s.%N)
    result "$k.compact_dry_run_kb" "$(RSS_STDOUT="$OUT/raw/compact-$n-at$t.json" peak_rss_kb \
      "$ADB" --db "$s" compact --all-over "$t" --idle 0 --dry-run --json)"
    t1=$(date +%s.%N)
    result "$k.compact_dry_run_s" "$(py "print(f'{$t1-$t0:.2f}')")"
    read -r planned tb < <(py '
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
print(t["planned"], t["tokens_before"])' "$OUT/raw/compact-$n-at$t.json")
    result "$k.compact_planned" "$planned"
    result "$k.compact_tokens_before" "$tb"
  done
done

# ---------------------------------------------------------------------------------------------
log "c. token counting: bpe-openai (agent-db) vs Python tiktoken"
n=${SIZES[0]}
CORPUS="$OUT/corpus-$n.nul"
read -r centries cbytes cmb < <(python3 benches/extract_corpus.py "${STORE[$n]}" "$CORPUS" |
  sed 's/[a-zA-Z]*=//g')
result "tokens.corpus" "raw_messages of the $n-conversation store, NUL-separated"
result "tokens.corpus_entries" "$centries"
result "tokens.corpus_mb" "$cmb"

VENV="$OUT/venv"
if ! "$VENV/bin/python" -c 'import tiktoken' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check tiktoken
fi
# tiktoken downloads o200k_base.tiktoken at runtime unless it is cached under
# TIKTOKEN_CACHE_DIR/sha1(url). Write it from the vocabulary compiled into bpe-openai (the one
# agent-db counts with) and check it against the sha256 tiktoken itself expects.
URL=https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken
KEY=$(printf '%s' "$URL" | sha1sum | cut -d' ' -f1)
# The expected sha256 as tiktoken's own source states it (the constant is its 0.7-0.14 value).
EXPECTED=$("$VENV/bin/python" -c '
import inspect, re, tiktoken_ext.openai_public as p
m = re.search(r"expected_hash=\"([0-9a-f]{64})\"", inspect.getsource(p.o200k_base))
print(m.group(1) if m else "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")')
"$COUNT" --dump-tiktoken "$OUT/tiktoken-cache/$KEY"
GOT=$(sha256sum "$OUT/tiktoken-cache/$KEY" | cut -d' ' -f1)
[[ "$GOT" == "$EXPECTED" ]] || die "vocabulary from bpe-openai has sha256 $GOT, tiktoken expects $EXPECTED"
result tokens.vocab_sha256 "$GOT (matches tiktoken's expected hash)"
result tokens.tiktoken "$("$VENV/bin/python" -c 'import tiktoken; print(tiktoken.__version__)')"

run_py() { # offline: a dead proxy makes any download attempt fail loudly
  TIKTOKEN_CACHE_DIR="$OUT/tiktoken-cache" HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 \
    "$VENV/bin/python" benches/tiktoken_count.py "$CORPUS"
}
run_rs() { "$COUNT" "$CORPUS"; }
: >"$OUT/raw/tokens.txt"
for ((i = 0; i < TOKEN_RUNS; i++)); do # interleaved, so noise hits both sides alike
  run_rs | sed 's/^/rust /' | tee -a "$OUT/raw/tokens.txt" >&2
  run_py | sed 's/^/python /' | tee -a "$OUT/raw/tokens.txt" >&2
done
read -r rs_mbs rs_tok rs_init py_mbs py_tok py_init < <(py '
import statistics, sys
rows = {"rust": [], "python": []}
for line in open(sys.argv[1]):
    side, *kv = line.split()
    rows[side].append(dict(x.split("=", 1) for x in kv))
out = []
for side in ("rust", "python"):
    r = rows[side]
    mbs = statistics.median(float(x["mb_per_s"]) for x in r)
    init = statistics.median(float(x["init_s"]) for x in r)
    totals = {x["tokens"] for x in r}
    out += [f"{mbs:.3f}", totals.pop() if len(totals) == 1 else "inconsistent", f"{init:.3f}"]
print(*out)' "$OUT/raw/tokens.txt")
result tokens.runs_each "$TOKEN_RUNS"
result tokens.rust.mb_per_s "$rs_mbs"
result tokens.rust.total "$rs_tok"
result tokens.rust.init_s "$rs_init"
result tokens.python.mb_per_s "$py_mbs"
result tokens.python.total "$py_tok"
result tokens.python.init_s "$py_init"
result tokens.ratio_rust_over_python "$(ratio "$rs_mbs" "$py_mbs")"
result tokens.totals_identical "$([[ "$rs_tok" == "$py_tok" ]] && echo 1 || echo 0)"

result machine.loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
result finished_at "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# ---------------------------------------------------------------------------------------------
log "summary (bench-out/results.txt has every figure)"
get() { awk -F= -v k="$1" '$1 == k {sub(/^[^=]*=/, ""); print; exit}' "$RESULTS"; }
{
  printf 'benchmark\tstore\tmeasured\tbaseline\tratio\tgoal\n'
  first=${SIZES[0]} last=${SIZES[-1]} t0=${THRESHOLDS[0]}
  for n in "${SIZES[@]}"; do
    for t in "${THRESHOLDS[@]}"; do
      k="list.$n.at$t"
      printf 'list --all-over %s: agent-db/sqlite3 median s\t%s\t%s\t%s\t%s\t<=1.3\n' "$t" "$n" \
        "$(get "$k.agent-db.median_s")" "$(get "$k.sqlite3.median_s")" "$(get "$k.ratio_agent_db_over_sqlite3")"
      printf 'list --all-over %s: agent-db/sqlite3 CPU s\t%s\t%s\t%s\t%s\t<=1.3\n' "$t" "$n" \
        "$(get "$k.agent-db.cpu_s")" "$(get "$k.sqlite3.cpu_s")" "$(get "$k.cpu_ratio_agent_db_over_sqlite3")"
      printf 'list --all-over %s: rows (sel+skip) agent-db/sqlite3, identical=%s\t%s\t%s+%s\t%s\t-\t-\n' "$t" \
        "$(get "$k.rows_identical")" "$n" "$(get "$k.rows.agent_db_selected")" "$(get "$k.rows.agent_db_skipped")" "$(get "$k.rows.sqlite3")"
    done
    printf 'list --all-over %s: agent-db/naive sqlite3 median s\t%s\t%s\t%s\t%s\t-\n' "$t0" "$n" \
      "$(get "list.$n.at$t0.agent-db.median_s")" "$(get "list.$n.at$t0.naive.median_s")" "$(get "list.$n.at$t0.ratio_agent_db_over_naive")"
    printf 'list --all-over %s: agent-db/naive sqlite3 CPU s\t%s\t%s\t%s\t%s\t-\n' "$t0" "$n" \
      "$(get "list.$n.at$t0.agent-db.cpu_s")" "$(get "list.$n.at$t0.naive.cpu_s")" "$(get "list.$n.at$t0.cpu_ratio_agent_db_over_naive")"
  done
  printf 'list cold cache: agent-db/sqlite3 median s\t%s\t%s\t%s\t%s\t-\n' "$first" \
    "$(get "cold.$first.agent-db.median_s")" "$(get "cold.$first.sqlite3.median_s")" "$(get "cold.$first.ratio_agent_db_over_sqlite3")"
  printf 'list cold cache: LIST_SQL/summaries-driven (same rows=%s)\t%s\t%s\t%s\t%s\t-\n' \
    "$(get "cold.$first.summaries_driven_same_output")" "$first" \
    "$(get "cold.$first.list_sql.median_s")" "$(get "cold.$first.summaries_driven.median_s")" "$(get "cold.$first.ratio_list_sql_over_summaries_driven")"
  for t in "${THRESHOLDS[@]}"; do
    for what in list compact_dry_run; do
      a=$(get "rss.$last.at$t.${what}_kb") b=$(get "rss.$first.at$t.${what}_kb")
      note=""
      [[ $what == compact_dry_run ]] &&
        note=" (planned $(get "rss.$last.at$t.compact_planned")/$(get "rss.$first.at$t.compact_planned"))"
      printf 'peak RSS KB %s --all-over %s%s\t%s/%s\t%s\t%s\t%s\tflat\n' "$what" "$t" "$note" \
        "$last" "$first" "$a" "$b" "$(ratio "$a" "$b")"
    done
  done
  printf 'tokens MB/s rust/tiktoken\t%s\t%s\t%s\t%s\t>=1.0\n' "$first" "$rs_mbs" "$py_mbs" "$(get tokens.ratio_rust_over_python)"
  printf 'token totals rust/tiktoken (identical=%s)\t%s\t%s\t%s\t-\t-\n' "$(get tokens.totals_identical)" "$first" "$rs_tok" "$py_tok"
} | column -t -s $'\t'
