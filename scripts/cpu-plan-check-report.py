#!/usr/bin/env python3
"""Benchmark (b) read from the tuner's plan checks: the merged groups the CPU tuner chose, each
timed inside the whole model against its layers run layerwise (search/plan_check.h, step 1: one
process, interleaved rounds, medians).

  scripts/cpu-plan-check-report.py OUT [OUT ...] [--md FILE]

OUT is a scripts/cpu-e2e.py output folder: every OUT/<model>-b<batch>*/tune/plan.json that holds
a plan check is read. Per model: the groups the tuner chose, how many the check kept, the
geomean of their in-model speedups (layerwise median / merged median), and the end-to-end
speedup of what was kept against layerwise (step 2; "-" when nothing was kept); then the
geomean over every chosen group, and over those of MobileNetV2 and EfficientNet-B0.
"""
import argparse
import glob
import json
import math
import os
import sys


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def read(folder):
    rows = []
    for plan in sorted(glob.glob(os.path.join(folder, "*", "tune", "plan.json"))):
        j = json.load(open(plan))
        check = j.get("plan_check")
        if check is None:
            continue
        ratios = [g["layerwise_ms"]["median"] / g["merged_ms"]["median"] for g in check["groups"]]
        e2e = None
        if check.get("checked_ms") and check.get("layerwise_ms"):
            e2e = check["layerwise_ms"]["median"] / check["checked_ms"]["median"]
        rows.append({"model": j["model"], "batch": j["batch"], "chosen": check["merged_groups"],
                     "kept": check["merged_groups"] - check["reverted"] if not check["fell_back"]
                     else 0, "fell_back": check["fell_back"], "ratios": ratios, "e2e": e2e})
    return rows


def table(rows):
    out = ["| model | batch | groups chosen | kept | in-model speedup, geomean (min-max) | "
           "kept plan vs layerwise |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        rs = r["ratios"]
        spd = f"{geomean(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})" if rs else "-"
        e2e = f"{r['e2e']:.3f}" + (" (fell back)" if r["fell_back"] else "") if r["e2e"] else "-"
        out.append(f"| {r['model']} | {r['batch']} | {r['chosen']} | {r['kept']} | {spd} | {e2e} |")
    every = [x for r in rows for x in r["ratios"]]
    blocks = [x for r in rows if r["model"] in ("mobilenet_v2", "efficientnet_b0")
              for x in r["ratios"]]
    out.append("")
    out.append(f"Geomean over the {len(every)} groups the tuner chose: {geomean(every):.3f}; "
               f"over the {len(blocks)} of MobileNetV2 and EfficientNet-B0: {geomean(blocks):.3f}; "
               f"faster inside the model: {sum(1 for x in every if x > 1)} of {len(every)}.")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="+")
    ap.add_argument("--md")
    args = ap.parse_args()
    rows = [r for f in args.out for r in read(f)]
    if not rows:
        print("no plan checks found under " + ", ".join(args.out), file=sys.stderr)
        return 1
    text = table(rows)
    if args.md:
        open(args.md, "w").write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
