#!/usr/bin/env python3
"""Per-forward, per-kernel GPU time from an Nsight Compute raw CSV (docs/benchmarks.md).

    ncu --clock-control none --csv --page raw \\
        --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \\
        tandem bench -m MODEL --device cuda -p 64 -n 2 -r 1 --verify 4 > run.csv
    python3 bench/cuda/ncu_forwards.py run.csv          # one line per forward
    python3 bench/cuda/ncu_forwards.py run.csv 5 8      # kernels of forwards 5 and 8

A forward starts at each embedding kernel. Kernels are grouped by name, grid and block
size; times are ncu's (kernels serialised, caches flushed between them: no PDL overlap).
"""
import collections
import csv
import re
import sys


def launches(path):
    header = None
    for row in csv.reader(open(path)):
        if "Kernel Name" in row:
            header = row
        elif header and len(row) == len(header) and row[0].isdigit():
            yield dict(zip(header, row))


def micros(launch):
    return float(launch["gpu__time_duration.sum"].replace(",", "")) / 1e3  # ns -> us


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    forwards, current = [], []
    for launch in launches(sys.argv[1]):
        if re.search(r"embedding", launch["Kernel Name"]) and current:
            forwards.append(current)
            current = []
        current.append(launch)
    if current:
        forwards.append(current)
    for i, f in enumerate(forwards):
        print(f"forward {i}: {len(f)} launches, {sum(map(micros, f)):.1f} us")
    for i in map(int, sys.argv[2:]):
        groups = collections.defaultdict(lambda: [0, 0.0])
        for launch in forwards[i]:
            key = "%s grid=%s block=%s" % (launch["Kernel Name"][:90], launch["launch__grid_size"],
                                           launch["launch__block_size"])
            groups[key][0] += 1
            groups[key][1] += micros(launch)
        print(f"--- forward {i}")
        for key, (count, total) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
            print(f"{total:9.1f} us  {count:4d} x {total / count:7.2f}  {key}")


if __name__ == "__main__":
    main()
