"""Write every conversations.raw_messages value of a kodelet store to a NUL-separated file.

usage: python3 benches/extract_corpus.py STORE OUT

Rows are written in rowid order, each value's UTF-8 bytes followed by one NUL byte (JSON text
never contains a raw NUL). Prints `entries=N bytes=B MB=M` on stdout.
"""
import sqlite3
import sys


def main() -> None:
    store, out = sys.argv[1], sys.argv[2]
    # immutable: read-only without creating -wal/-shm files (a read-only connection in WAL mode
    # would create them and leave them behind); nothing writes the store during the benchmark.
    con = sqlite3.connect(f"file:{store}?mode=ro&immutable=1", uri=True)
    entries = 0
    total = 0
    with open(out, "wb") as f:
        for (raw,) in con.execute("SELECT raw_messages FROM conversations ORDER BY rowid"):
            b = raw.encode("utf-8")
            if b"\0" in b:
                sys.exit(f"extract_corpus: a raw_messages value contains NUL; cannot separate")
            f.write(b)
            f.write(b"\0")
            entries += 1
            total += len(b)
    print(f"entries={entries} bytes={total} MB={total / 1e6:.3f}")


if __name__ == "__main__":
    main()
