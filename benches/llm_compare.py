#!/usr/bin/env python3
"""Compare two runs of the same compaction (benches/llm.sh with BENCH_LLM_BASE): the stores they
left and their `--json` reports must be the same.

    python3 benches/llm_compare.py RAW_A RAW_B     # RAW.db (the store) and RAW.json (the report)

Stores: every table's schema and every row, as a multiset of rows (the rows agent-db inserts
come in the writer's commit order, which concurrency makes vary from run to run), except:
  - agent_db_compactions.id, and agent_db_archive.compaction_id that points at it: ids assigned
    in commit order; each archive row is compared under its compaction's conversation id instead;
  - agent_db_compactions.agent_db_version: names the build (`--version`), which differs by design;
  - sqlite_sequence: the last id handed out (the number of compactions is compared anyway).
Every other column, the stored conversations, the pre-images (compressed bytes as stored) and
the audit rows' times (pinned by AGENT_DB_NOW) included, must be equal.

Reports: the whole document, except `duration_ms` and `elapsed_ms` wherever they appear
(wall-clock figures) and each row's `compaction_id` (the audit row's id, see above). Rows are
compared in report order.

Prints the differences, and as its last line `identical` or `DIFFERENT`; exits 1 when different.
"""
import hashlib
import json
import sqlite3
import sys

TIMING_KEYS = {"duration_ms", "elapsed_ms", "compaction_id"}


def rows_of(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    tables = [
        (name, sql)
        for name, sql in con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type IN ('table','index','trigger','view') ORDER BY name"
        )
    ]
    out = {"schema": sorted((n, s or "") for n, s in tables)}
    conv_of = {
        cid: conv for cid, conv in con.execute("SELECT id, conversation_id FROM agent_db_compactions")
    } if any(n == "agent_db_compactions" for n, _ in tables) else {}
    for name, sql in tables:
        if not (sql or "").upper().startswith("CREATE TABLE") or name == "sqlite_sequence":
            continue
        cur = con.execute(f'SELECT * FROM "{name}"')
        cols = [d[0] for d in cur.description]
        digests = []
        for row in cur:
            r = dict(zip(cols, row))
            if name == "agent_db_compactions":
                r.pop("id")
                r.pop("agent_db_version")
            if name == "agent_db_archive":
                r["compaction_id"] = conv_of.get(r["compaction_id"], f"? {r['compaction_id']}")
            h = hashlib.sha256(repr(sorted((k, type(v).__name__, v) for k, v in r.items())).encode())
            digests.append((h.hexdigest(), describe(name, r)))
        digests.sort()
        out[name] = digests
    return out


def describe(table, r):
    for k in ("id", "conversation_id", "compaction_id", "session_id"):
        if k in r:
            return f"{table} {k}={r[k]!r}" + (f" seq={r['seq']}" if "seq" in r else "")
    return table


def strip(doc):
    if isinstance(doc, dict):
        return {k: strip(v) for k, v in doc.items() if k not in TIMING_KEYS}
    if isinstance(doc, list):
        return [strip(v) for v in doc]
    return doc


def main():
    a, b = sys.argv[1], sys.argv[2]
    problems = []
    ra, rb = rows_of(a + ".db"), rows_of(b + ".db")
    if ra["schema"] != rb["schema"]:
        problems.append("schemas differ")
    for table in sorted(set(ra) | set(rb)):
        if table == "schema":
            continue
        da, db_ = ra.get(table, []), rb.get(table, [])
        ha, hb = {h for h, _ in da}, {h for h, _ in db_}
        only_a = [d for h, d in da if h not in hb]
        only_b = [d for h, d in db_ if h not in ha]
        if len(da) != len(db_) or only_a or only_b:
            problems.append(
                f"{table}: {len(da)} vs {len(db_)} rows; only in A: {only_a[:3]}; only in B: {only_b[:3]}"
            )
        else:
            print(f"{table}: {len(da)} rows equal")
    ja, jb = strip(json.load(open(a + ".json"))), strip(json.load(open(b + ".json")))
    if ja != jb:
        ca, cb = ja.get("conversations", []), jb.get("conversations", [])
        diffs = [x.get("id") for x, y in zip(ca, cb) if x != y]
        problems.append(
            f"--json reports differ ({len(ca)} vs {len(cb)} rows; rows differing: {diffs[:5]};"
            f" totals equal: {ja.get('totals') == jb.get('totals')})"
        )
    else:
        print(f"--json reports equal ({len(ja.get('conversations', []))} rows)")
    for p in problems:
        print(p)
    print("DIFFERENT" if problems else "identical")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
