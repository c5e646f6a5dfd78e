#!/usr/bin/env python3
"""Benchmark (b) of the CPU target as a table: per group, oneDNN layerwise (with its post-op
fusions), oneDNN with its 1x1 + depthwise fusion where the group has such a pair, and the best
merged candidate of the brick kernels (medians of build/benchmarks/cpu_groups_bench's
repetitions), and the speedups best merged / oneDNN.

  scripts/cpu-groups-report.py groups.json [--out results/cpu/groups.md]
"""
import argparse
import json
import math
import statistics
import sys

ENGINES = ("onednn", "onednn_dw", "padded", "memoized")


def split(name):
    parts = [p for p in name.split("/") if not p.startswith(("min_time", "real_time"))]
    for i, p in enumerate(parts):
        if p in ENGINES:
            return "/".join(parts[:i]), "/".join(parts[i:])
    return "/".join(parts), ""


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--out")
    args = ap.parse_args()
    bench = json.load(open(args.json))
    groups, errors = {}, []
    for b in bench["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        label, engine = split(b.get("run_name", b["name"]))
        if b.get("error_occurred"):
            errors.append(f"{label} {engine}: {b.get('error_message')}")
            continue
        groups.setdefault(label, {})[engine] = b["real_time"]
    ctx = bench.get("context", {})
    lines = ["# Benchmark (b): merged groups vs oneDNN layerwise\n",
             f"Machine: {ctx.get('cpu_model', '?')}, {ctx.get('num_cpus', '?')} CPUs, ISA "
             f"{ctx.get('isa', '?')} ({ctx.get('lanes', '?')} lanes), {ctx.get('onednn', '?')}; "
             f"run {ctx.get('date', '?')}. Times in ms, medians of the repetitions; every "
             "candidate's output was checked against oneDNN's before it was timed.\n",
             "| group | oneDNN | oneDNN 1x1+dw | best merged | its time | merged / oneDNN "
             "speedup | vs 1x1+dw |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    speed, speed_dw, per_set = [], [], {}
    for label in sorted(groups):
        g = groups[label]
        if "onednn" not in g:
            continue
        merged = {k: v for k, v in g.items() if not k.startswith("onednn")}
        if not merged:
            continue
        best = min(merged, key=merged.get)
        s = g["onednn"] / merged[best]
        speed.append(s)
        per_set.setdefault(label.split("/")[0], []).append(s)
        dw = g.get("onednn_dw")
        sdw = dw / merged[best] if dw else None
        if sdw:
            speed_dw.append(sdw)
        lines.append(f"| {label} | {g['onednn']:.3f} | {dw:.3f} | {best} | {merged[best]:.3f} | "
                     f"{s:.2f} | {sdw:.2f} |" if dw else
                     f"| {label} | {g['onednn']:.3f} | - | {best} | {merged[best]:.3f} | "
                     f"{s:.2f} | - |")
    summary = [f"\nGroups: {len(speed)}. Best merged / oneDNN layerwise: geomean "
               f"{geomean(speed):.3f}, range {min(speed):.2f}-{max(speed):.2f}, "
               f"{sum(s > 1 for s in speed)} faster. Against oneDNN's 1x1 + depthwise fusion "
               f"({len(speed_dw)} groups): geomean {geomean(speed_dw):.3f}.",
               "Per set: " + "; ".join(f"{k} geomean {geomean(v):.3f} (n {len(v)})"
                                       for k, v in sorted(per_set.items()))]
    if errors:
        summary.append(f"Candidates not timed ({len(errors)}): " + "; ".join(errors[:5]))
    text = "\n".join(lines[:2] + summary + [""] + lines[2:]) + "\n"
    if args.out:
        open(args.out, "w").write(text)
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
