#!/usr/bin/env python3
"""The CPU time any program needs to do what one LLM batch over a kodelet store does, measured
with other tools than agent-db's pipeline (docs/benchmarks.md, P2 "Fixed work").

    python3 benches/llm_fixed.py STORE COMPACTED BIN_DIR [WORK]

STORE is the kodelet store before the batch; COMPACTED is the same store after agent-db's batch
(benches/llm.sh keeps it as raw/floor.db with BENCH_LLM_FIXED); BIN_DIR holds the release
builds of examples/count_tokens.rs and examples/json_scan.rs; WORK (default: a temporary
folder) holds the inputs made before timing. Five parts, each timed alone (CPU seconds):

  read      every conversation's raw_messages (its tokens_before needs all of them) and the
            tool_results of each compacted conversation (its pre-image), as bytes, with
            Python's sqlite3 (the same SQLite C library).
  decode    every raw_messages value read as JSON into nothing (json_scan's `scan_s`:
            serde_json into IgnoredAny), the least a decoder of the histories does.
  count     the exact o200k token count of every raw_messages value, with the fastest counter
            here: count_tokens's `count_s` (agent-db's count_text; Python tiktoken takes
            several times longer). It counts the raw JSON, keys and quotes too: more tokens
            than the messages' texts (the report's tokens_before add up to fewer).
  compress  the pre-images (raw_messages and tool_results of each compacted conversation) at
            zstd level 1, the archive's level, with the zstd command (-T1, no checksum).
  write     the batch's writes replayed: on a copy of STORE in WAL mode, synchronous=NORMAL (as
            agent-db writes), per compacted conversation one transaction that stores its new
            conversations row, its agent_db_compactions row and its archive rows (taken from
            COMPACTED before timing), then a checkpoint.

None of it builds a message, prepares a prompt, sends a request or checks an answer. Prints key=value lines: each part's seconds, the sum, and
the sum in ms per MB of STORE.
"""
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile


def cpu_self():
    t = os.times()
    return t.user + t.system


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.split("\n\n")[1])
    store, compacted, bins = sys.argv[1:4]
    work = sys.argv[4] if len(sys.argv) == 5 else tempfile.mkdtemp(prefix="llm_fixed.")
    os.makedirs(work, exist_ok=True)
    out = sqlite3.connect(f"file:{compacted}?mode=ro&immutable=1", uri=True)
    ids = [r[0] for r in out.execute("SELECT DISTINCT conversation_id FROM agent_db_compactions ORDER BY 1")]
    if not ids:
        sys.exit(f"llm_fixed: {compacted}: no compaction recorded")
    src = sqlite3.connect(f"file:{store}?mode=ro&immutable=1", uri=True)
    marks = ",".join("?" * len(ids))

    # Inputs, before any timing: the token corpus, the pre-images, the rows to write.
    corpus = os.path.join(work, "corpus.nul")
    with open(corpus, "wb") as f:
        for (raw,) in src.execute("SELECT CAST(raw_messages AS BLOB) FROM conversations ORDER BY rowid"):
            f.write(raw or b"")
            f.write(b"\0")
    images = []
    for k, (raw, tools) in enumerate(
        src.execute(f"SELECT CAST(raw_messages AS BLOB), CAST(tool_results AS BLOB) FROM conversations WHERE id IN ({marks})", ids)
    ):
        for name, value in (("raw", raw), ("tools", tools)):
            if value is not None:
                path = os.path.join(work, f"image-{k}-{name}")
                with open(path, "wb") as f:
                    f.write(value)
                images.append(path)
    cols = [r[1] for r in out.execute("PRAGMA table_info(conversations)")]
    new_rows = {r[0]: r for r in out.execute(f"SELECT {', '.join(cols)} FROM conversations WHERE id IN ({marks})", ids)}
    comp_cols = [r[1] for r in out.execute("PRAGMA table_info(agent_db_compactions)") if r[1] != "id"]
    arch_cols = [r[1] for r in out.execute("PRAGMA table_info(agent_db_archive)") if r[1] != "compaction_id"]
    writes = []
    for cid, *comp in out.execute(f"SELECT id, {', '.join(comp_cols)} FROM agent_db_compactions ORDER BY id"):
        arch = out.execute(f"SELECT {', '.join(arch_cols)} FROM agent_db_archive WHERE compaction_id = ? ORDER BY seq", (cid,)).fetchall()
        writes.append((comp[comp_cols.index("conversation_id")], comp, arch))
    ddl = [s for (s,) in out.execute("SELECT sql FROM sqlite_master WHERE name LIKE 'agent_db%' AND sql IS NOT NULL ORDER BY type DESC, name")]
    target = os.path.join(work, "store.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(target + suffix):
            os.remove(target + suffix)
    shutil.copyfile(store, target)
    db = sqlite3.connect(target, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    for s in ddl:
        db.execute(s)

    parts = {}
    # read
    t = cpu_self()
    n = 0
    for (raw,) in src.execute("SELECT CAST(raw_messages AS BLOB) FROM conversations"):
        n += len(raw or b"")
    for (tools,) in src.execute(f"SELECT CAST(tool_results AS BLOB) FROM conversations WHERE id IN ({marks})", ids):
        n += len(tools or b"")
    parts["read"] = cpu_self() - t
    # decode and count: each example times its own work, after reading the corpus (and, for
    # count_tokens, loading the vocabulary); one thread each, so CPU time is the time taken.
    def example(name):
        line = subprocess.run([os.path.join(bins, name), corpus], check=True, capture_output=True, text=True).stdout
        return dict(re.findall(r"(\w+)=(\S+)", line))

    parts["decode"] = float(example("json_scan")["scan_s"])
    kv = example("count_tokens")
    parts["count"] = float(kv["count_s"])
    # compress
    t = cpu_children()
    with open(os.devnull, "wb") as null:
        subprocess.run(["zstd", "-1", "-T1", "-q", "-c", "--no-check", *images], check=True, stdout=null)
    parts["compress"] = cpu_children() - t
    # write
    set_cols = ", ".join(f"{c} = ?" for c in cols if c != "id")
    t = cpu_self()
    for conv, comp, arch in writes:
        db.execute("BEGIN IMMEDIATE")
        row = new_rows[conv]
        db.execute(f"UPDATE conversations SET {set_cols} WHERE id = ?", [v for c, v in zip(cols, row) if c != "id"] + [conv])
        cur = db.execute(f"INSERT INTO agent_db_compactions ({', '.join(comp_cols)}) VALUES ({','.join('?' * len(comp_cols))})", comp)
        db.executemany(
            f"INSERT INTO agent_db_archive (compaction_id, {', '.join(arch_cols)}) VALUES (?, {','.join('?' * len(arch_cols))})",
            [(cur.lastrowid, *a) for a in arch],
        )
        db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    parts["write"] = cpu_self() - t
    db.close()

    mb = os.path.getsize(store) / 1e6
    total = sum(parts.values())
    print(f"conversations_compacted={len(ids)}")
    print(f"bytes_read={n}")
    print(f"tokens={kv.get('tokens')}")
    print(f"preimage_files={len(images)}")
    for k, v in parts.items():
        print(f"{k}_s={v:.3f}")
    print(f"total_s={total:.3f}")
    print(f"ms_per_mb={total * 1000 / mb:.2f}")
    if len(sys.argv) == 4:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
