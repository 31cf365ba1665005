"""Drop the given files' pages from the OS page cache (posix_fadvise DONTNEED), so that the next
read comes from disk: the cold-cache runs of benches/run.sh. Needs no privileges and touches
nothing but these files' cached pages (dirty pages are written back first by fdatasync)."""
import os
import sys

for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
