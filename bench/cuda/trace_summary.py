#!/usr/bin/env python3
"""Per-step, per-kernel summary of a libtandem_kernel_trace.so CSV.

    trace_summary.py trace.csv [--nodes N] [--top K] [--positions A:B] [--replays A:B]

A graph replay (one decode step, or one verify block) is the set of kernels
sharing the correlation id of its cudaGraphLaunch. Steps with the most common
kernel count (or --nodes N) are summarised. For kernel i of a step, in order
of start time:
  dur     end - start (GPU time of the kernel, overlap included);
  early   end(i-1) - start(i): how long before its predecessor ended it was
          running (programmatic dependent launch; > 0 means overlap);
  adds    end(i) - end(i-1): what it adds to the step (the sum over a step is
          its span from the first start to the last end).
Rows are kernel positions grouped by name and grid; the means are over steps.
--positions A:B also prints kernel positions A..B-1 of the step one by one
(e.g. one layer's kernels, to tell the o projection from the down projection).
Between consecutive steps it lists what the GPU ran outside the graphs (the
greedy pick, the copies of a newer trace library: "memcpy HtoD" / "memcpy
DtoH"), each at its median start and end after the step's last kernel, then
when the next step's first kernel started: the rest of the gap is the host.
"""
import argparse
import bisect
import collections
import csv
import shutil
import statistics
import subprocess
import sys


def demangle(names):
    if not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def short(name):
    # "void tandem::kernels::gpu::(anonymous namespace)::gemm_kernel<Tile<...>>(...)" -> "gemm_kernel<Tile<...>>"
    s = name[5:] if name.startswith("void ") else name
    s = s.replace("(anonymous namespace)::", "").replace("tandem::kernels::gpu::", "")
    return s.split("(", 1)[0][:70]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--nodes", type=int, default=0)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--positions", default="", help="A:B, kernel positions to list one by one")
    ap.add_argument("--replays", default="", help="A:B, only replays A..B-1 (in time order) of that kernel count")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    groups = collections.defaultdict(list)
    for r in rows:
        if r["graph"] != "0":
            groups[r["correlation"]].append(r)
    if not groups:
        sys.exit("no graph replays in the trace")
    sizes = collections.Counter(len(g) for g in groups.values())
    nodes = a.nodes or sizes.most_common(1)[0][0]
    steps = [sorted(g, key=lambda r: int(r["start_ns"])) for g in groups.values() if len(g) == nodes]
    steps.sort(key=lambda g: int(g[0]["start_ns"]))
    if a.replays:  # e.g. a `bench --verify 1,4` trace: the 1-row replays come first, then the 4-row ones
        first, last = (int(v) for v in a.replays.split(":"))
        steps = steps[first:last]
    else:
        steps = steps[1:] if len(steps) > 2 else steps  # the first replay warms up
    names = demangle(sorted({r["name"] for g in steps for r in g}))
    print(f"graph replays by kernel count: {dict(sizes.most_common(6))}; summarising {len(steps)} of {nodes}")
    spans, between = [], []
    per_pos = collections.defaultdict(lambda: {"dur": [], "early": [], "adds": []})
    for si, g in enumerate(steps):
        start = [int(r["start_ns"]) for r in g]
        end = [int(r["end_ns"]) for r in g]
        spans.append((max(end) - start[0]) / 1e3)
        if si + 1 < len(steps):
            between.append((int(steps[si + 1][0]["start_ns"]) - max(end)) / 1e3)
        prev_end = None
        for i, r in enumerate(g):
            p = per_pos[i]
            p["key"] = (short(names[r["name"]]), r["grid"], r["block"], r["smem"])
            p["dur"].append((end[i] - start[i]) / 1e3)
            p["early"].append(0.0 if prev_end is None else (prev_end - start[i]) / 1e3)
            p["adds"].append((end[i] - start[i] if prev_end is None else max(0, end[i] - prev_end)) / 1e3)
            prev_end = end[i] if prev_end is None else max(prev_end, end[i])
    print(f"step span: median {statistics.median(spans):.1f} us (min {min(spans):.1f}, max {max(spans):.1f})")
    if between:
        print(f"between replays (host, copies, sampling): median {statistics.median(between):.1f} us")
        print_gap(rows, steps, names)
    by_kind = collections.OrderedDict()
    for i in sorted(per_pos):
        p = per_pos[i]
        k = by_kind.setdefault(p["key"], {"n": 0, "dur": 0.0, "early": 0.0, "adds": 0.0})
        k["n"] += 1
        k["dur"] += statistics.mean(p["dur"])
        k["early"] += statistics.mean(p["early"])
        k["adds"] += statistics.mean(p["adds"])
    total = sum(k["adds"] for k in by_kind.values())
    print(f"{'kernel':70} {'grid':>6} {'blk':>5} {'smem':>6} {'n':>4} {'dur/us':>8} {'early':>7} {'adds':>7} {'share':>6}")
    for key, k in sorted(by_kind.items(), key=lambda kv: -kv[1]["adds"])[: a.top]:
        n = k["n"]
        print(f"{key[0]:70} {key[1]:>6} {key[2]:>5} {key[3]:>6} {n:>4} {k['dur'] / n:8.2f} {k['early'] / n:7.2f} "
              f"{k['adds'] / n:7.2f} {100 * k['adds'] / total:5.1f}%")
    print(f"sum of adds {total:.1f} us per step")
    if a.positions:
        first, last = (int(v) for v in a.positions.split(":"))
        print(f"{'pos':>4} {'kernel':70} {'grid':>6} {'dur/us':>8} {'early':>7} {'adds':>7}")
        for i in range(max(0, first), min(last, nodes)):
            p = per_pos[i]
            print(f"{i:>4} {p['key'][0]:70} {p['key'][1]:>6} {statistics.mean(p['dur']):8.2f} "
                  f"{statistics.mean(p['early']):7.2f} {statistics.mean(p['adds']):7.2f}")


def print_gap(rows, steps, names):
    """The events between consecutive steps, by their order in the gap (medians over the gaps)."""
    outside = sorted((r for r in rows if r["graph"] == "0"), key=lambda r: int(r["start_ns"]))
    starts = [int(r["start_ns"]) for r in outside]
    per_order = collections.defaultdict(lambda: {"start": [], "end": [], "name": collections.Counter()})
    nexts = []
    for si in range(len(steps) - 1):
        t0 = max(int(r["end_ns"]) for r in steps[si])
        t1 = int(steps[si + 1][0]["start_ns"])
        lo = bisect.bisect_left(starts, t0)
        hi = bisect.bisect_left(starts, t1)
        for order, r in enumerate(outside[lo:hi]):
            e = per_order[order]
            e["start"].append((int(r["start_ns"]) - t0) / 1e3)
            e["end"].append((int(r["end_ns"]) - t0) / 1e3)
            label = r["name"] if r["name"].startswith("memcpy") else short(names.get(r["name"], r["name"]))
            e["name"][f"{label} ({r['grid']})" if r["name"].startswith("memcpy") else label] += 1
        nexts.append((t1 - t0) / 1e3)
    print(f"{'in the gap (after the last kernel)':70} {'start':>8} {'end':>8} {'seen':>5}")
    for order in sorted(per_order):
        e = per_order[order]
        print(f"{e['name'].most_common(1)[0][0][:70]:70} {statistics.median(e['start']):8.1f} "
              f"{statistics.median(e['end']):8.1f} {len(e['start']):>5}")
    print(f"{'the next step (first kernel start)':70} {statistics.median(nexts):8.1f}")


if __name__ == "__main__":
    main()
