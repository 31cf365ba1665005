"""Token-counting throughput of Python tiktoken (o200k_base, encode_ordinary) on a corpus file:
the baseline half of the tokenizer benchmark in benches/run.sh.

usage: python3 benches/tiktoken_count.py CORPUS

CORPUS holds NUL-separated UTF-8 texts. The file is read and decoded before timing; the
encoding's load is timed on its own (init_s); then every entry is encoded with
`enc.encode_ordinary(text)` one at a time on one thread. Prints one line of key=value pairs in
the same shape as examples/count_tokens.rs.

tiktoken fetches o200k_base.tiktoken from the internet unless it is in TIKTOKEN_CACHE_DIR
under sha1(url); benches/run.sh places it there (written from the vocabulary compiled into
bpe-openai, checked against tiktoken's expected sha256).
"""
import sys
import time

import tiktoken


def main() -> None:
    path = sys.argv[1]
    with open(path, "rb") as f:
        data = f.read()
    entries = [e.decode("utf-8") for e in data.split(b"\0") if e]
    nbytes = sum(len(e.encode("utf-8")) for e in entries)

    t0 = time.perf_counter()
    enc = tiktoken.get_encoding("o200k_base")
    enc.encode_ordinary("warm up")
    init = time.perf_counter() - t0

    t1 = time.perf_counter()
    tokens = 0
    for e in entries:
        tokens += len(enc.encode_ordinary(e))
    secs = time.perf_counter() - t1
    mb = nbytes / 1e6
    print(
        f"entries={len(entries)} bytes={nbytes} MB={mb:.3f} tokens={tokens} "
        f"init_s={init:.4f} count_s={secs:.4f} mb_per_s={mb / secs:.3f} tiktoken={tiktoken.__version__}"
    )


if __name__ == "__main__":
    main()
