#!/usr/bin/env python3
"""Where a program's time goes between its driver calls, from SCUDA_TRACE.

    SCUDA_TRACE=1 scuda run -- PROGRAM 2> trace.txt
    python3 bench/trace_gaps.py trace.txt [--from MS] [--to MS] [--gap MS]

Each SCUDA_TRACE line is `scuda[trace PID] MS TID NAME` (docs/troubleshoot.md).
For each thread, the time from one call to the thread's next is charged to
the first: a call that waited (a synchronizing call) or long work in the
program between two calls shows up as a large gap. Prints the calls by
count, the gaps summed by the call before them, and the longest gaps with
the calls on either side. --from and --to bound the window (monotonic ms,
as the lines carry; a program can print time.monotonic() * 1e3 to mark
its phases)."""
import argparse
import collections
import re

LINE = re.compile(r"scuda\[trace \d+\] ([\d.]+) (\d+) (\S+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--from", dest="start", type=float, default=float("-inf"))
    ap.add_argument("--to", dest="end", type=float, default=float("inf"))
    ap.add_argument("--gap", type=float, default=3.0, help="list gaps longer than this (ms)")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    calls = []
    with open(a.trace, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m and a.start <= float(m.group(1)) <= a.end:
                calls.append((float(m.group(1)), int(m.group(2)), m.group(3)))
    if not calls:
        raise SystemExit("trace_gaps: no SCUDA_TRACE lines in %s (in that window)" % a.trace)
    span = calls[-1][0] - calls[0][0]
    print("%d calls over %.1f ms, %d threads" % (len(calls), span, len({c[1] for c in calls})))
    print("calls:", ", ".join("%s %d" % kv for kv in collections.Counter(c[2] for c in calls).most_common(a.top)))
    by_thread = collections.defaultdict(list)
    for c in calls:
        by_thread[c[1]].append(c)
    after = collections.defaultdict(float)
    long_gaps = []
    for tid, cs in by_thread.items():
        for x, y in zip(cs, cs[1:]):
            g = y[0] - x[0]
            after[x[2]] += g
            if g > a.gap:
                long_gaps.append((g, x[2], y[2], x[0], tid))
    print("time after each call, summed (ms):",
          ", ".join("%s %.1f" % (k, v) for k, v in sorted(after.items(), key=lambda kv: -kv[1])[:a.top]))
    print("%d gaps over %.1f ms, %.1f ms in all" % (len(long_gaps), a.gap, sum(g[0] for g in long_gaps)))
    for g, before, nxt, t, tid in sorted(long_gaps, reverse=True)[:a.top]:
        print("  %8.1f ms after %s, before %s, at %.3f (thread %d)" % (g, before, nxt, t, tid))


if __name__ == "__main__":
    main()
