#!/usr/bin/env python3
"""Benchmark (a) of the CPU target as a table: each conv layer's GFLOP/s through oneDNN and
through the brick kernels (medians over the repetitions of build/benchmarks/cpu_layers_bench's
JSON), each as a fraction of the measured FMA peak, and their ratio.

  scripts/cpu-layers-report.py layers.json [--out results/cpu/layers.md]

The summary says what issue (a) asks: the median ratio over layers and the lowest one.
"""
import argparse
import json
import statistics
import sys


def medians(bench):
    """{name: {counter: median}} from the aggregate rows (or the single runs)."""
    out = {}
    for b in bench["benchmarks"]:
        if b.get("error_occurred"):
            out[b["run_name"]] = {"error": b.get("error_message", "error")}
            continue
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        cv = out.get(name, {}).get("cv")
        out[name] = {"gflops": b["GFLOP/s"] / 1e9 if b["GFLOP/s"] > 1e6 else b["GFLOP/s"],
                     "ms": b["real_time"], "threads": int(b.get("threads", 0))}
        if cv is not None:
            out[name]["cv"] = cv
    for b in bench["benchmarks"]:  # coefficient of variation of the time, when repeated
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "cv":
            out.setdefault(b["run_name"], {})["cv"] = b["real_time"]
    return out


def split(name):
    """'model/bN/layer/shape.../engine/...' -> (label, engine)."""
    parts = [p for p in name.split("/") if not p.startswith(("min_time", "real_time"))]
    for i, p in enumerate(parts):
        if p in ("onednn", "bricks"):
            return "/".join(parts[:i]), p
    return "/".join(parts), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--out")
    args = ap.parse_args()
    bench = json.load(open(args.json))
    m = medians(bench)
    peak = max(v["gflops"] for k, v in m.items() if k.startswith("peak/") and "gflops" in v)
    rows, ratios, errors = {}, [], []
    for name, v in m.items():
        if name.startswith("peak/"):
            continue
        label, engine = split(name)
        if "error" in v:
            errors.append(f"{label} {engine}: {v['error']}")
            continue
        rows.setdefault(label, {})[engine] = v
    ctx = bench.get("context", {})
    lines = [f"# Benchmark (a): conv layers, oneDNN vs the brick kernels\n",
             f"Machine: {ctx.get('cpu_model', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
             f"{next(iter(rows.values()))['onednn'].get('threads', '?')} threads, "
             f"ISA {ctx.get('isa', '?')} ({ctx.get('lanes', '?')} lanes), "
             f"libxsmm target {ctx.get('libxsmm_target', '?')}, {ctx.get('onednn', '?')}; "
             f"run {ctx.get('date', '?')}.",
             f"Measured FMA peak (all threads): {peak:.1f} GFLOP/s. GFLOP/s count 2·MACs of the "
             "layer (padding taps included in neither), medians of the repetitions; ratio = "
             "bricks / oneDNN.\n",
             "| layer | oneDNN GFLOP/s | % peak | bricks GFLOP/s | % peak | bricks / oneDNN |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    per_model = {}
    for label in sorted(rows):
        r = rows[label]
        if "onednn" not in r or "bricks" not in r:
            continue
        a, b = r["onednn"]["gflops"], r["bricks"]["gflops"]
        q = b / a
        ratios.append(q)
        per_model.setdefault("/".join(label.split("/")[:2]), []).append(q)
        lines.append(f"| {label} | {a:.1f} | {100 * a / peak:.0f}% | {b:.1f} | "
                     f"{100 * b / peak:.0f}% | {q:.2f} |")
    summary = [f"\nLayers: {len(ratios)}. Ratio bricks / oneDNN: median "
               f"{statistics.median(ratios):.3f}, lowest {min(ratios):.3f}, highest "
               f"{max(ratios):.3f}; {sum(q < 0.5 for q in ratios)} below 0.5, "
               f"{sum(q >= 0.85 for q in ratios)} at 0.85 or more.",
               "Per model and batch: " + "; ".join(
                   f"{k} median {statistics.median(v):.3f} (lowest {min(v):.3f}, n {len(v)})"
                   for k, v in sorted(per_model.items()))]
    if errors:
        summary.append("Errors: " + "; ".join(errors))
    text = "\n".join(lines[:3] + summary + [""] + lines[3:]) + "\n"
    if args.out:
        open(args.out, "w").write(text)
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
