#!/usr/bin/env python3
"""The overhead of the Python package over its C++ call, for a model-only ResNet-50 tune (batch
8, H200, tf32, backend none), measured in one process.

    PYTHONPATH=build/python .venv/bin/python benchmarks/python_overhead.py [--reps N] [--out F]

Per repetition, interleaved so that drift hits all alike, each into a database of its own:
  python   brickdl.tune(Model.zoo('resnet50', batch=8), target=..., ...): the settings
           applied (the experiment parsed again), the tune, the Plan built from the report
  c++      brickdl._brickdl.tune(...) on the already-set experiment: the C++ call alone (the
           driver on its thread, the report converted to Python objects)
  cli      brickdl-tune resnet50 --batch 8 ... as a process (with its start and exit), for scale
Prints (and with --out writes as Markdown) the median, p25 and p75 of each, and the ratios
python / c++ and cli / c++ of the medians.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import brickdl
from brickdl import _brickdl

SETTINGS = dict(target="H200", precision="tf32", backend="none")


def quartiles(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return statistics.median(xs), q[0], q[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                  "apps"))
    ap.add_argument("--out", help="write the table (Markdown) here too")
    a = ap.parse_args()
    model = brickdl.Model.zoo("resnet50", batch=8)
    times = {"python": [], "c++": [], "cli": []}
    speedups = set()
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.reps + 1):  # the first round warms caches and is dropped
            db = os.path.join(tmp, f"{k}")
            t0 = time.perf_counter()
            plan = brickdl.tune(model, db=db + "-py.db", **SETTINGS)
            t1 = time.perf_counter()
            tuned = model.with_settings(db=db + "-c.db", **SETTINGS)
            t2 = time.perf_counter()
            _brickdl.tune(tuned._e, False, False, None)
            t3 = time.perf_counter()
            subprocess.run([os.path.join(a.bin, "brickdl-tune"), "resnet50", "--batch", "8",
                            "--target", "H200", "--precision", "tf32", "--backend", "none",
                            "--quiet", "--db", db + "-cli.db", "--out", db + "-out"],
                           check=True, stdout=subprocess.DEVNULL)
            t4 = time.perf_counter()
            speedups.add(round(plan.speedup, 12))
            if k > 0:
                times["python"].append((t1 - t0) * 1e3)
                times["c++"].append((t3 - t2) * 1e3)
                times["cli"].append((t4 - t3) * 1e3)
    base = statistics.median(times["c++"])
    lines = [f"Model-only ResNet-50 tune (batch 8, H200, tf32, backend none), {a.reps} "
             f"repetitions each, interleaved, one process ({sys.executable}); wall ms.", "",
             "| call | median ms | p25 | p75 | median / c++ |", "| --- | ---: | ---: | ---: | ---: |"]
    for name in ("c++", "python", "cli"):
        med, p25, p75 = quartiles(times[name])
        lines.append(f"| {name} | {med:.1f} | {p25:.1f} | {p75:.1f} | {med / base:.3f} |")
    lines += ["", f"plan speedup in every python repetition: {sorted(speedups)}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
