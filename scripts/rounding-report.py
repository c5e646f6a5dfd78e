#!/usr/bin/env python3
"""The errors of the emulated kernels against both references, per test and precision.

Reads the table the host-emulation tests append to with BRICKDL_TEST_ERROR_TABLE (tests/device/
emulated_group.h record_errors) and prints results/kernels/rounding.md:

    BRICKDL_TEST_ERROR_TABLE=t.tsv build/tests/device/cuda_host_tests
    scripts/rounding-report.py t.tsv > results/kernels/rounding.md
"""
import collections
import sys

HEADER = """<!-- written by: BRICKDL_TEST_ERROR_TABLE=t.tsv build/tests/device/cuda_host_tests; scripts/rounding-report.py t.tsv (host emulator; no GPU) -->
# The emulated kernels' errors against the fp32 reference and the rounded reference

Each row: the host-emulation test's checks of one precision (every strategy, shape and brick it
runs). Errors are max |out − ref| / max |ref| over a check's output, the largest over the row's
checks. *Share used* is the largest over elements and checks of |out − ref| / the element's
allowance (kernels/validation.h Comparison::bound_used): 1 is the edge of the bound.

- **fp32 reference**, under `group_tolerance` (kernels/validation.h, what the measurers use):
  norm_rtol = 8 · L · (u_p + 2^-24 · sqrt(K)).
- **rounded reference** (kernels/cuda/rounded_reference.h), under `rounded_tolerance`: one ulp of
  the storage type element-wise, norm_rtol = 3 · Σ_l (2^-24 · sqrt(K_l) + u_l / sqrt(K_l)).
"""


def fmt(x):
    return f"{x:.2e}" if x else "0"


def rng(lo, hi):
    return fmt(lo) if lo == hi else f"{fmt(lo)}–{fmt(hi)}"


def main(path):
    rows = collections.defaultdict(list)
    for line in open(path):
        test, what, r_used, f_used, r_err, r_norm, _r_rtol, f_err, f_norm = line.rstrip("\n").split("\t")
        precision = what.split()[0]
        rows[(test, precision)].append(
            (float(r_used), float(f_used), float(r_err), float(r_norm), float(f_err), float(f_norm)))
    print(HEADER)
    print("| test | precision | checks | fp32 ref: largest error | old norm_rtol | share used "
          "| rounded ref: largest error | new norm_rtol | share used |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    worst = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    order = {"fp32": 0, "tf32": 1, "bf16": 2, "fp16": 3}
    for (test, p), v in sorted(rows.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        r_used = max(x[0] for x in v)
        f_used = max(x[1] for x in v)
        r_err = max(x[2] for x in v)
        f_err = max(x[4] for x in v)
        r_norm = [x[3] for x in v]
        f_norm = [x[5] for x in v]
        print(f"| {test} | {p} | {len(v)} | {fmt(f_err)} | {rng(min(f_norm), max(f_norm))} | "
              f"{f_used:.3f} | {fmt(r_err)} | {rng(min(r_norm), max(r_norm))} | {r_used:.3f} |")
        w = worst[p]
        w[0], w[1] = max(w[0], f_err), max(w[1], f_used)
        w[2], w[3] = max(w[2], r_err), max(w[3], r_used)
    print("\n## Per precision, over every test\n")
    print("| precision | fp32 ref: largest error | share of the old bound used "
          "| rounded ref: largest error | share of the new bound used |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for p in sorted(worst, key=lambda k: order.get(k, 9)):
        w = worst[p]
        print(f"| {p} | {fmt(w[0])} | {w[1]:.3f} | {fmt(w[2])} | {w[3]:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
