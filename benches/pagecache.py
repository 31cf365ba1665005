"""Control whether files are in the OS page cache, for benches/run.sh.

usage: python3 benches/pagecache.py warm FILE...   read the files through, so they are cached
       python3 benches/pagecache.py evict FILE...  drop their cached pages (posix_fadvise
                                                   DONTNEED) so the next read comes from disk

Needs no privileges and touches nothing but these files' pages. Missing files are ignored
(e.g. a -wal that does not exist).
"""
import os
import sys


def warm(path: str) -> None:
    buf = bytearray(1 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in ("warm", "evict"):
        sys.exit(__doc__)
    action = warm if sys.argv[1] == "warm" else evict
    for path in sys.argv[2:]:
        if os.path.exists(path):
            action(path)


if __name__ == "__main__":
    main()
