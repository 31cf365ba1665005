#!/usr/bin/env python3
"""CPU time per agent-db thread group from a `perf record` of one run (benches/llm.sh, run.sh).

usage: perf_threads.py PERF_DATA LABEL

Prints one JSON line: for each group, its CPU seconds (cpu-clock periods are nanoseconds) and
its share of the samples, grouped by agent-db's thread names: the main thread (the first one,
named after the binary; it drives the tasks), the selection ("agent-db-select"), the planning pool ("agent-db-plan-N"),
the writer ("agent-db-write"), its checkpoint thread ("agent-db-ckpt") and tokio's HTTP workers
("tokio-rt-worker"). `w_over_p` is (writer + checkpoint + main) / planning: with --jobs 1 the
planning thread is the critical path and the rest runs beside it, so the --jobs 2 speed-up is
at most 2 / (1 + w_over_p).
"""
import json
import re
import subprocess
import sys

GROUPS = {
    "main": "(the first thread)",
    "selection": "agent-db-select",
    "planning": "agent-db-plan-",
    "writer": "agent-db-write",
    "checkpoint": "agent-db-ckpt",
    "workers": "tokio-rt-worker",
}


def main() -> None:
    data, label = sys.argv[1], sys.argv[2]
    report = subprocess.run(
        ["perf", "report", "-i", data, "--no-children", "--sort", "pid",
         "-F", "overhead,period,pid", "--stdio", "-g", "none"],
        capture_output=True, text=True, check=False).stdout
    cpu = dict.fromkeys(GROUPS, 0.0)
    share = dict.fromkeys(GROUPS, 0.0)
    rows = []
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+(\d+):(\S+)", line)
        if m:
            rows.append((int(m.group(3)), m.group(4), int(m.group(2)) / 1e9, float(m.group(1))))
    # The main thread is the first (lowest tid); its name is the binary's file name.
    first = min((r[0] for r in rows), default=None)
    for tid, comm, seconds, percent in rows:
        for name, prefix in GROUPS.items():
            if (name == "main" and tid == first) or (
                name != "main"
                and (comm == prefix or (prefix.endswith("-") and comm.startswith(prefix)))
            ):
                cpu[name] += seconds
                share[name] += percent / 100
                break
    out = {"label": label}
    for name in GROUPS:
        out[f"{name}_cpu_s"] = round(cpu[name], 3)
        out[f"{name}_share"] = round(share[name], 3)
    if cpu["planning"] > 0:
        w = cpu["writer"] + cpu["checkpoint"] + cpu["main"]
        out["w_over_p"] = round(w / cpu["planning"], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
