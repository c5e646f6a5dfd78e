#!/usr/bin/env python3
"""The overhead of the Python package over its C++ call, for a model-only ResNet-50 tune (batch
8, H200, tf32, backend none), measured in one process.

    PYTHONPATH=build/python .venv/bin/python benchmarks/python_overhead.py [--reps N] [--out F]

Per repetition, interleaved so that drift hits all alike, each into a database of its own:
  python   brickdl.tune(Model.zoo('resnet50', batch=8), target=..., ...): the settings
           applied (the experiment parsed again, its graph built), the tune, the Plan built
  python, preset  brickdl.tune(model) of a model whose settings were applied before: the
           package's own layer over the C++ call (the Plan built, the warnings read)
  settings model.with_settings(...) alone: parsing the experiment again with the settings
  c++      brickdl._brickdl.tune(...) on the already-set experiment: the C++ call alone (the
           driver on its thread, the report converted to Python objects)
  cli      brickdl-tune resnet50 --batch 8 ... as a process (with its start and exit), for scale
Besides, within each `python` call: the time of the C++ call inside it (brickdl._brickdl.tune,
wrapped by a timer), so the package's own share of that very call is measured without the
run-to-run noise of the database writes (fsync).
Prints (and with --out writes as Markdown) the median, p25 and p75 of each, and the ratios
of the medians to c++.
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
    inner = []
    c_tune = _brickdl.tune

    def timed(*args):
        t = time.perf_counter()
        try:
            return c_tune(*args)
        finally:
            inner.append((time.perf_counter() - t) * 1e3)

    times = {"python": [], "python, preset": [], "settings": [], "c++": [], "cli": []}
    speedups = set()
    ratios, shares = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.reps + 1):  # the first round warms caches and is dropped
            db = os.path.join(tmp, f"{k}")
            _brickdl.tune = timed
            t0 = time.perf_counter()
            plan = brickdl.tune(model, db=db + "-py.db", **SETTINGS)
            t1 = time.perf_counter()
            _brickdl.tune = c_tune
            tuned = model.with_settings(db=db + "-c.db", **SETTINGS)
            t2 = time.perf_counter()
            _brickdl.tune(tuned._e, False, False, None)
            t3 = time.perf_counter()
            subprocess.run([os.path.join(a.bin, "brickdl-tune"), "resnet50", "--batch", "8",
                            "--target", "H200", "--precision", "tf32", "--backend", "none",
                            "--quiet", "--db", db + "-cli.db", "--out", db + "-out"],
                           check=True, stdout=subprocess.DEVNULL)
            t4 = time.perf_counter()
            preset = model.with_settings(db=db + "-pre.db", **SETTINGS)
            t5 = time.perf_counter()
            brickdl.tune(preset)
            t6 = time.perf_counter()
            speedups.add(round(plan.speedup, 12))
            if k > 0:
                times["python"].append((t1 - t0) * 1e3)
                ratios.append((t1 - t0) * 1e3 / inner[-1])
                shares.append((t1 - t0) * 1e3 - inner[-1])
                times["c++"].append((t3 - t2) * 1e3)
                times["cli"].append((t4 - t3) * 1e3)
                times["settings"].append((t2 - t1) * 1e3)
                times["python, preset"].append((t6 - t5) * 1e3)
    base = statistics.median(times["c++"])
    lines = [f"Model-only ResNet-50 tune (batch 8, H200, tf32, backend none), {a.reps} "
             f"repetitions each, interleaved, one process ({sys.executable}); wall ms.", "",
             "| call | median ms | p25 | p75 | median / c++ |", "| --- | ---: | ---: | ---: | ---: |"]
    for name in ("c++", "python, preset", "settings", "python", "cli"):
        med, p25, p75 = quartiles(times[name])
        lines.append(f"| {name} | {med:.1f} | {p25:.1f} | {p75:.1f} | {med / base:.3f} |")
    med, p25, p75 = quartiles(ratios)
    ms, s25, s75 = quartiles(shares)
    lines += ["", f"Within each `python` call, its time / the C++ call inside it: median {med:.4f} "
              f"(p25 {p25:.4f}, p75 {p75:.4f}); the package's own share: median {ms:.2f} ms "
              f"(p25 {s25:.2f}, p75 {s75:.2f}).", "",
              f"plan speedup in every python repetition: {sorted(speedups)}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
