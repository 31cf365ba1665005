#!/usr/bin/env bash
# The space benchmark (docs/benchmarks.md, "Space"). Run from anywhere: `bash benches/space.sh`.
#
# For each store (gen_space: opencode 1.18 with its streamed event log, kodelet with compaction
# segments, goose v17; every other conversation over 30 days old) at each size, each command
# under /usr/bin/time -v against its sqlite3 floor, the statements that give the same answer or
# do the same work, measured in the same run (interleaved, the median of the runs; peak RSS the
# largest):
#   stats    `agent-db stats --json`   | dbstat per b-tree + the per-conversation bytes query
#   reclaim  `reclaim --yes` (copy)    | archive INSERT…SELECT + DELETE of the same rows, one tx
#   vacuum   `vacuum` (copy)           | VACUUM
#   retire   `retire --older-than DAYSd --yes` (copy) | ATTACH cold + INSERT…SELECT + DELETE, one tx
#            (only when the binary has the command); and, where zstd is installed, the same
#            followed by `zstd -1 -T0` of the cold file: the same answer, a compressed cold file
# Output under bench-out/space/ (gitignored): stores/, raw/ (time -v, outputs), results.tsv and
# results.md (the table docs/benchmarks.md shows).
#
# Knobs (environment):
#   BENCH_SPACE_AGENTS="opencode kodelet goose"
#   BENCH_SPACE_SIZES="500 2000"   store sizes, MB (10^6 bytes)
#   BENCH_SPACE_RUNS=3             timed runs of each command and floor
#   BENCH_SPACE_OPS="stats reclaim vacuum retire"
#   BENCH_SPACE_SEED=1
#   BENCH_SPACE_RETIRE_DAYS=30     retire's --older-than, in days (bytes moved: 10: 49–81%,
#                                  30: 28–51%, 90: 0–21%, by store)
#   BENCH_SPACE_NOW                the stores' clock (default: today 00:00 UTC; agent-db runs
#                                  with AGENT_DB_NOW set to it)
#   BENCH_SPACE_KEEP=1             0: delete each store after measuring it
#   BENCH_NO_BUILD=0               1: use target/release/{agent-db,gen_space} as they are
#   BENCH_SQLITE3=sqlite3          the sqlite3 shell of the floors
# Needs: cargo, sqlite3 (with dbstat), GNU time, jq; zstd for retire's second floor.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT="$ROOT/bench-out/space"
AGENTS=${BENCH_SPACE_AGENTS:-"opencode kodelet goose"}
SIZES=${BENCH_SPACE_SIZES:-"500 2000"}
RUNS=${BENCH_SPACE_RUNS:-3}
OPS=${BENCH_SPACE_OPS:-"stats reclaim vacuum retire"}
SEED=${BENCH_SPACE_SEED:-1}
NOW=${BENCH_SPACE_NOW:-$(date -u +%Y-%m-%dT00:00:00Z)}
KEEP=${BENCH_SPACE_KEEP:-1}
SQLITE3=${BENCH_SQLITE3:-sqlite3}
ZSTD=$(command -v zstd || true)
mkdir -p "$OUT/stores" "$OUT/work" "$OUT/raw" "$OUT/sql"

if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet --bin agent-db --bin gen_space
fi
BIN="$ROOT/target/release/agent-db"
GEN="$ROOT/target/release/gen_space"
export AGENT_DB_NOW="$NOW"
NOW_MS=$(( $(date -u -d "$NOW" +%s) * 1000 ))
# agent-db's default --idle (10m) and retire's --older-than, as the floors' cutoffs.
RETIRE_DAYS=${BENCH_SPACE_RETIRE_DAYS:-30}
IDLE_MS=$(( NOW_MS - 600000 ))
OLD_MS=$(( NOW_MS - RETIRE_DAYS * 86400000 ))
OLD_TEXT=$(date -u -d "@$(( NOW_MS / 1000 - RETIRE_DAYS * 86400 ))" '+%Y-%m-%d %H:%M:%S')
HAS_RETIRE=0
"$BIN" retire --help >/dev/null 2>&1 && HAS_RETIRE=1

# Byte length of a column in the floor's SQL: octet_length where the shell has it (3.43+).
if "$SQLITE3" :memory: "SELECT octet_length('a')" >/dev/null 2>&1; then
  ol() { echo "coalesce(octet_length($1), 0)"; }
else
  ol() { echo "coalesce(length(CAST($1 AS BLOB)), 0)"; }
fi

RESULTS="$OUT/results.tsv"
printf 'agent\tsize_mb\tfile_bytes\top\tagent_db_s\tfloor_s\tratio\tagent_db_rss_mb\tfloor_rss_mb\tshare\tfloor_zstd_s\tratio_zstd\n' >"$RESULTS"

log() { printf '[space] %s\n' "$*" >&2; }

# timed NAME CMD...: run CMD under /usr/bin/time -v (stdout to raw/NAME.out); sets SECS, RSS_KB.
timed() {
  local name=$1
  shift
  if ! /usr/bin/time -v -o "$OUT/raw/$name.time" "$@" >"$OUT/raw/$name.out" 2>"$OUT/raw/$name.err"; then
    log "FAILED: $name: $*"
    tail -5 "$OUT/raw/$name.err" >&2
    return 1
  fi
  SECS=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' "$OUT/raw/$name.time")
  RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$OUT/raw/$name.time")
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
maxof() { sort -g | tail -1; }

# fresh SRC DST: a copy of the store (and nothing else) at DST.
fresh() {
  rm -f "$2" "$2-wal" "$2-shm" "$2.agent-db.lock" "$2.agent-db-cold.db" "$2.agent-db-cold.db-wal" "$2.agent-db-cold.db-shm"
  cp "$1" "$2"
}

# The floor SQL of OP for AGENT (empty: no floor, the command has nothing to do there).
floor_sql() {
  local agent=$1 op=$2
  case "$op:$agent" in
    stats:opencode)
      echo "SELECT name, sum(pgsize) FROM dbstat GROUP BY name;"
      echo "SELECT id, SUM(b) FROM (SELECT session_id AS id, $(ol data) AS b FROM message UNION ALL SELECT session_id, $(ol data) FROM part UNION ALL SELECT aggregate_id, $(ol data) FROM event) GROUP BY id ORDER BY 2 DESC, 1 LIMIT 10;" ;;
    stats:kodelet)
      echo "SELECT name, sum(pgsize) FROM dbstat GROUP BY name;"
      echo "SELECT id, $(ol raw_messages) + $(ol tool_results) + $(ol compaction_history) FROM conversations ORDER BY 2 DESC, 1 LIMIT 10;" ;;
    stats:goose)
      echo "SELECT name, sum(pgsize) FROM dbstat GROUP BY name;"
      echo "SELECT session_id, SUM($(ol content_json) + $(ol metadata_json)) FROM messages GROUP BY session_id ORDER BY 2 DESC, 1 LIMIT 10;" ;;
    reclaim:opencode)
      local idle="s.time_updated < $IDLE_MS AND s.workspace_id IS NULL AND NOT EXISTS (SELECT 1 FROM session_share h WHERE h.session_id = s.id)"
      echo "PRAGMA secure_delete = OFF;"
      echo "BEGIN IMMEDIATE;"
      echo "CREATE TABLE floor_undo AS SELECT * FROM event WHERE 0;"
      echo "INSERT INTO floor_undo SELECT e.* FROM event e JOIN session s ON s.id = e.aggregate_id WHERE $idle;"
      echo "DELETE FROM event WHERE aggregate_id IN (SELECT s.id FROM session s WHERE $idle);"
      echo "COMMIT;" ;;
    vacuum:*)
      echo "VACUUM;" ;;
    retire:opencode)
      retire_sql "SELECT id FROM session WHERE time_updated < $OLD_MS" \
        "session:id message:session_id part:session_id session_message:session_id event_sequence:aggregate_id event:aggregate_id todo:session_id session_share:session_id" ;;
    retire:kodelet)
      retire_sql "SELECT id FROM conversations WHERE julianday(substr(updated_at, 1, 19)) < julianday('$OLD_TEXT')" \
        "conversations:id conversation_summaries:id" ;;
    retire:goose)
      retire_sql "SELECT id FROM sessions WHERE updated_at < '$OLD_TEXT'" \
        "sessions:id messages:session_id usage_ledger:session_id" ;;
  esac
}

# retire_sql SELECT-IDS "table:column …": the moved rows copied into a cold file and deleted, in
# one transaction (children first on delete).
retire_sql() {
  local ids=$1 tables=$2 t
  echo "PRAGMA secure_delete = OFF;"
  echo "ATTACH 'COLD' AS cold;"
  echo "BEGIN IMMEDIATE;"
  echo "CREATE TEMP TABLE moving AS $ids;"
  for t in $tables; do
    echo "CREATE TABLE cold.${t%%:*} AS SELECT * FROM main.${t%%:*} WHERE ${t#*:} IN (SELECT id FROM moving);"
  done
  for t in $(echo "$tables" | tr ' ' '\n' | tac); do
    echo "DELETE FROM main.${t%%:*} WHERE ${t#*:} IN (SELECT id FROM moving);"
  done
  echo "COMMIT;"
}

# The agent-db command of OP on DB.
agent_cmd() {
  local op=$1 db=$2
  case "$op" in
    stats) echo "$BIN --db $db stats --json" ;;
    reclaim) echo "$BIN --db $db reclaim --yes --json" ;;
    vacuum) echo "$BIN --db $db vacuum --json" ;;
    retire) echo "$BIN --db $db retire --older-than ${RETIRE_DAYS}d --yes --json" ;;
  esac
}

# What share of the file OP took out, from agent-db's --json (empty when it says nothing).
share_of() {
  local op=$1 out=$2 bytes=$3
  case "$op" in
    reclaim) jq -r --argjson f "$bytes" '[.. | objects | select(has("removed")) | .removed[]? | select(.status == "removed") | .bytes] | add // 0 | . / $f * 100 | floor | tostring + "%"' "$out" 2>/dev/null || true ;;
    retire) jq -r --argjson f "$bytes" '[.conversations[]? | select(.status == "retired") | .bytes] | add // 0 | . / $f * 100 | floor | tostring + "%"' "$out" 2>/dev/null || true ;;
    vacuum) jq -r '.vacuum | "\(.bytes_before / 1e6 | floor) → \(.bytes_after / 1e6 | floor) MB"' "$out" 2>/dev/null || true ;;
  esac
}

measure() {
  local agent=$1 size=$2 store=$3 op=$4 bytes
  bytes=$(stat -L -c %s "$store")
  local sql="$OUT/sql/$op-$agent.sql"
  floor_sql "$agent" "$op" >"$sql"
  local work_a="$OUT/work/agent-db.db" work_f="$OUT/work/floor.db"
  local a_s=() f_s=() z_s=() a_rss=() f_rss=() r share=""
  for r in $(seq 1 "$RUNS"); do
    local order="a f"
    [ $((r % 2)) = 0 ] && order="f a"
    for who in $order; do
      local db=$store
      if [ "$op" != stats ]; then
        db=$([ "$who" = a ] && echo "$work_a" || echo "$work_f")
        fresh "$store" "$db"
      fi
      cat "$db" >/dev/null # the page cache warm for both
      if [ "$who" = a ]; then
        # shellcheck disable=SC2046
        timed "$agent-$size-$op-agent-db-$r" $(agent_cmd "$op" "$db")
        a_s+=("$SECS") a_rss+=("$RSS_KB")
        share=$(share_of "$op" "$OUT/raw/$agent-$size-$op-agent-db-$r.out" "$bytes")
      elif [ -s "$sql" ]; then
        sed "s#'COLD'#'$db.cold'#" "$sql" >"$sql.run"
        rm -f "$db.cold"
        timed "$agent-$size-$op-floor-$r" "$SQLITE3" "$db" ".read $sql.run"
        f_s+=("$SECS") f_rss+=("$RSS_KB")
        rm -f "$db.cold"
        if [ "$op" = retire ] && [ -n "$ZSTD" ]; then
          # The same answer as agent-db's: the cold file compressed (zstd -1 on every core).
          fresh "$store" "$db"
          cat "$db" >/dev/null
          timed "$agent-$size-$op-floorz-$r" sh -c '"$1" "$2" ".read $3" && "$4" -q -1 -T0 --rm "$2.cold"' \
            floor "$SQLITE3" "$db" "$sql.run" "$ZSTD"
          z_s+=("$SECS")
          rm -f "$db.cold" "$db.cold.zst"
        fi
      fi
    done
  done
  local a f ratio="-" am fm="-"
  a=$(printf '%s\n' "${a_s[@]}" | median)
  am=$(printf '%s\n' "${a_rss[@]}" | maxof)
  f="-"
  if [ ${#f_s[@]} -gt 0 ]; then
    f=$(printf '%s\n' "${f_s[@]}" | median)
    fm=$(printf '%s\n' "${f_rss[@]}" | maxof)
    ratio=$(awk -v a="$a" -v f="$f" 'BEGIN {printf (f > 0 ? "%.2f" : "-"), a / f}')
    fm=$(awk -v k="$fm" 'BEGIN {printf "%.0f", k / 1024}')
  fi
  am=$(awk -v k="$am" 'BEGIN {printf "%.0f", k / 1024}')
  local z="-" zratio="-"
  if [ ${#z_s[@]} -gt 0 ]; then
    z=$(printf '%s\n' "${z_s[@]}" | median)
    zratio=$(awk -v a="$a" -v f="$z" 'BEGIN {printf (f > 0 ? "%.2f" : "-"), a / f}')
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$agent" "$size" "$bytes" "$op" "$a" "$f" "$ratio" "$am" "$fm" "${share:--}" "$z" "$zratio" >>"$RESULTS"
  log "$agent $size MB $op: agent-db ${a}s floor ${f}s ratio $ratio rss ${am} MB (floor ${fm} MB) ${share}; floor with zstd ${z}s ratio $zratio"
  rm -f "$work_a" "$work_a-wal" "$work_a-shm" "$work_f" "$work_f-wal" "$work_f-shm" "$work_a.agent-db-cold.db"*
}

log "load: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; sqlite3 $("$SQLITE3" --version | cut -d' ' -f1); now $NOW; retire --older-than ${RETIRE_DAYS}d"
for size in $SIZES; do
  for agent in $AGENTS; do
    store="$OUT/stores/$agent-$size-s$SEED-${NOW%%T*}.db"
    if [ ! -s "$store" ]; then
      rm -f "$store" "$store-wal" "$store-shm"
      "$GEN" --store "$agent" --size-mb "$size" --seed "$SEED" --now "$NOW" --out "$store"
    fi
    for op in $OPS; do
      if [ "$op" = retire ] && [ "$HAS_RETIRE" = 0 ]; then
        continue
      fi
      measure "$agent" "$size" "$store" "$op"
    done
    [ "$KEEP" = 1 ] || rm -f "$store"
  done
done

{
  echo "| store | size | command | agent-db | sqlite3 floor | ratio | peak RSS | floor RSS | share | floor + zstd | ratio |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  tail -n +2 "$RESULTS" | while IFS=$'\t' read -r agent size bytes op a f ratio am fm share z zratio; do
    printf '| %s | %s MB | %s | %s s | %s s | %s× | %s MB | %s MB | %s | %s s | %s× |\n' \
      "$agent" "$(awk -v b="$bytes" 'BEGIN {printf "%.0f", b / 1e6}')" "$op" "$a" "$f" "$ratio" "$am" "$fm" "$share" "$z" "$zratio"
  done
} >"$OUT/results.md"
cat "$OUT/results.md"
log "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"
