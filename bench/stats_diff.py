#!/usr/bin/env python3
"""stats_diff.py - the calls a stretch of a program sent, from two SCUDA_STATS
blocks in one log: what bench/torch_bench.py prints around a training
workload's first step ("=== scuda stats before the first step", "... after
the first step") when run with SCUDA_STATS=1 and --log-dir.

    python3 bench/stats_diff.py LOG [--from MARK] [--to MARK]

Prints the calls that waited for a reply (with the time they waited) and
the one-way ones, per op, most first. The round trips of the first step
over a slow link are what docs/architecture.md (3.8.4) counts."""
import argparse
import re
import sys

ROW = re.compile(r"^\s+(sync|async)\s+(\d+)\s+(\S+)(?:\s+([\d.]+) ms waited)?\s*$", re.M)


def block(text):
    """{(kind, op): (count, ms)} of one stats block."""
    return {(m.group(1), m.group(3)): (int(m.group(2)), float(m.group(4) or 0)) for m in ROW.finditer(text)}


def between(text, start, end):
    a = text.find("=== scuda stats " + start)
    b = text.find("=== scuda stats " + end)
    if a < 0 or b < 0 or b < a:
        sys.exit("stats_diff: no '=== scuda stats %s' followed by '=== scuda stats %s' (run with SCUDA_STATS=1)"
                 % (start, end))
    nxt = text.find("=== scuda stats ", b + 1)
    return block(text[a:b]), block(text[b:nxt if nxt >= 0 else len(text)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--from", dest="start", default="before the first step")
    ap.add_argument("--to", dest="end", default="after the first step")
    args = ap.parse_args()
    with open(args.log, errors="replace") as f:
        before, after = between(f.read(), args.start, args.end)
    rows = []
    for key, (n, ms) in after.items():
        n0, ms0 = before.get(key, (0, 0.0))
        if n > n0:
            rows.append((key[0], n - n0, key[1], ms - ms0))
    rows.sort(key=lambda r: (r[0] != "sync", -r[1], r[2]))
    waits = sum(r[1] for r in rows if r[0] == "sync")
    print("%d calls waited for a reply, %d one-way" % (waits, sum(r[1] for r in rows if r[0] == "async")))
    for kind, n, op, ms in rows:
        print(("  %-5s %6d  %-48s%s" % (kind, n, op, " %9.1f ms waited" % ms if kind == "sync" else "")).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
