#!/usr/bin/env python3
"""The summary of a device run (scripts/device/run.sh, scripts/gpu-check.sh): what the CUDA
backend measured in a tuning database, per merged group and per kernel kind.

    gpu_summary.py DB [--device-json F] [--stages F] [--csv OUT] [--title TEXT]

For every merged group of each experiment's latest run, one row per kernel:
  - the cuDNN layer-by-layer baseline: strict FP32 (CUDNN_FMA_MATH) and TF32, and for a bf16 /
    fp16 run cuDNN on 16-bit tensors (the run's own baseline, "16-bit" columns), cold (L2
    flushed once before the group's layers, run back to back) and warm (no flush: what a
    framework sees), from the group's own layerwise measurement, else the sum of its layers'
    single-layer measurements (each then cold);
  - our own layer-by-layer kernels (the layerwise measurement's `variant.own_layerwise_ms`);
  - every measured padded / memoized candidate: status, largest relative error against the
    reference, median time, DRAM bytes (CUPTI) against the model's prediction.
Beside each time, `kernel_ms`: the kernels' own durations (CUPTI activity records, mean per
run; the L2 flush and the launch spin left out), so the GPU's idle gaps between the launches of
a multi-kernel sequence show as time_ms - kernel_ms; each verdict gives kernel / wall time for
the best merged kernel and for cuDNN.
Then one line per kernel kind (padded, memoized, own layerwise): how many were validated,
the best time against cuDNN strict FP32 and TF32, DRAM over model (median); one verdict per
group; the framework baselines in the database; and the failures by status.

Stdlib only (sqlite3): it runs under any Python 3.9+, also on the GPU machine. Exit status 0
when it printed a summary (whatever was measured), 2 when the database cannot be read.
"""
import argparse
import csv
import json
import os
import sqlite3
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import brickdl_store  # noqa: E402

KINDS = ("padded", "memoized", "own layerwise")
CSV_FIELDS = ("experiment", "group", "kernel", "kind", "status", "max_rel_error", "time_ms",
              "kernel_ms", "cudnn_fp32_ms", "cudnn_tf32_ms", "vs_cudnn_fp32", "vs_cudnn_tf32",
              "cudnn_16bit_ms", "vs_cudnn_16bit", "dram_mb",
              "model_dram_mb", "dram_over_model", "model_ms", "time_over_model", "error")


def fmt(v, spec="{:.3f}"):
    return "-" if v is None else spec.format(v)


def ratio(a, b):
    return None if a is None or not b else a / b


class Db:
    def __init__(self, path):
        self.conn = brickdl_store.open_db(path)

    def one(self, sql, *args):
        row = self.conn.execute(sql, args).fetchone()
        return row[0] if row else None

    def all(self, sql, *args):
        return self.conn.execute(sql, args).fetchall()

    def latest(self, candidate_id, target_id):
        """(id, status, median_ms, error, max_rel_error) of the candidate's newest
        measurement on the target, or None."""
        return self.conn.execute(
            "SELECT id, status, median_ms, error, max_rel_error FROM measurements WHERE "
            "candidate_id = ? AND target_id = ? ORDER BY id DESC LIMIT 1",
            (candidate_id, target_id)).fetchone()

    def counter(self, mid, name):
        return self.one("SELECT value FROM counters WHERE measurement_id = ? AND name = ?",
                        mid, name)

    def dram(self, mid):
        r = self.counter(mid, "dram__bytes_read.sum")
        w = self.counter(mid, "dram__bytes_write.sum")
        return None if r is None or w is None else r + w


def brick_label(bd, bh, bw, cb, bn, cl, threads):
    return ((f"{bd}x" if bd > 1 else "") + f"{bh}x{bw}" + (f"/c{cb}" if cb else "") +
            (f"/n{bn}" if bn > 1 else "") + (f"/x{cl}" if cl > 1 else "") + f" t{threads}")


class Baseline:
    """The cuDNN (and own) layer-by-layer numbers of one group; None where unknown."""

    def __init__(self):
        self.source = "missing"
        self.fp32 = self.tf32 = self.fp32_warm = self.tf32_warm = None
        self.b16 = self.b16_warm = self.f16 = self.f16_warm = None
        self.own = self.own_warm = None
        # The kernels' own time of each (CUPTI), None without it.
        self.fp32_kernel = self.tf32_kernel = self.b16_kernel = self.f16_kernel = None
        self.own_kernel = None
        self.dram = self.model_dram = self.model_ms = None
        self.own_error = None
        self.plain = False  # True: no cuDNN numbers, the layerwise measurement itself


LAYERWISE_COUNTERS = (("fp32", "variant.cudnn_fp32_ms"), ("tf32", "variant.cudnn_tf32_ms"),
                      ("fp32_warm", "variant.cudnn_fp32_warm_ms"),
                      ("tf32_warm", "variant.cudnn_tf32_warm_ms"),
                      ("b16", "variant.cudnn_bf16_ms"), ("b16_warm", "variant.cudnn_bf16_warm_ms"),
                      ("f16", "variant.cudnn_fp16_ms"), ("f16_warm", "variant.cudnn_fp16_warm_ms"),
                      ("own", "variant.own_layerwise_ms"),
                      ("own_warm", "variant.own_layerwise_warm_ms"))
# The kernels' own durations beside those times (CUPTI; absent without it): not a time of the
# baseline, so not in the test above of whether the measurement carries cuDNN numbers.
KERNEL_COUNTERS = (("fp32_kernel", "variant.cudnn_fp32_kernel_ms"),
                   ("tf32_kernel", "variant.cudnn_tf32_kernel_ms"),
                   ("b16_kernel", "variant.cudnn_bf16_kernel_ms"),
                   ("f16_kernel", "variant.cudnn_fp16_kernel_ms"),
                   ("own_kernel", "variant.own_layerwise_kernel_ms"))


def layerwise_numbers(db, mid, pred):
    """One layerwise measurement's numbers as a dict (None where the counter is missing)."""
    out = {k: db.counter(mid, name) for k, name in LAYERWISE_COUNTERS}
    if all(v is None for v in out.values()):
        # No cuDNN and no variants (the cpu backend, or cuDNN unavailable): the measurement
        # itself is the layer-by-layer time, in the fp32 column.
        out["fp32"] = db.one("SELECT median_ms FROM measurements WHERE id = ?", mid)
        out["plain"] = True
    out |= {k: db.counter(mid, name) for k, name in KERNEL_COUNTERS}
    out["dram"] = db.dram(mid)
    out["own_error"] = db.counter(mid, "variant.own_layerwise_max_rel_error")
    if db.counter(mid, "variant.own_layerwise_wrong"):
        out["own"] = out["own_warm"] = None
    out["model_dram"] = pred[1] if pred else None
    out["model_ms"] = pred[0] if pred else None
    return out


def add_up(parts):
    """Sums each key over the parts; None for a key any part lacks."""
    keys = [k for k in parts[0].keys() if k not in ("own_error", "plain")]
    errors = [p["own_error"] for p in parts if p["own_error"] is not None]
    return {k: (None if any(p.get(k) is None for p in parts) else sum(p[k] for p in parts))
            for k in keys} | {"own_error": max(errors) if errors else None,
                              "plain": any(p.get("plain") for p in parts)}


def group_baseline(db, run_id, target_id, spec, workload_id, first, last):
    """The group's own layerwise measurement, else the sum of its single layers'."""
    b = Baseline()
    pred_sql = ("SELECT c.id, p.time_ms, p.dram_bytes FROM candidates c LEFT JOIN predictions "
                "p ON p.candidate_id = c.id AND p.gpu_spec = ? WHERE c.workload_id = ? AND "
                "c.strategy = 'layerwise'")
    own = db.conn.execute(pred_sql, (spec, workload_id)).fetchone()
    m = db.latest(own[0], target_id) if own else None
    numbers = None
    if m and m[1] == "ok":
        numbers = layerwise_numbers(db, m[0], own[1:])
        b.source = "group, back to back"
    else:
        parts = []
        for layer in range(first, last + 1):
            wid = db.one("SELECT workload_id FROM run_groups WHERE run_id = ? AND first_layer = ? "
                         "AND last_layer = ?", run_id, layer, layer)
            single = db.conn.execute(pred_sql, (spec, wid)).fetchone() if wid else None
            sm = db.latest(single[0], target_id) if single else None
            if not sm or sm[1] != "ok":
                return b
            parts.append(layerwise_numbers(db, sm[0], single[1:]))
        numbers = add_up(parts)
        b.source = "sum of single layers, each cold"
    for k, v in numbers.items():
        setattr(b, k, v)
    return b


def half(b):
    """The 16-bit cuDNN baseline of a bf16 / fp16 run: (label, cold ms, warm ms), or Nones."""
    if b.b16 is not None:
        return "bf16", b.b16, b.b16_warm
    if b.f16 is not None:
        return "fp16", b.f16, b.f16_warm
    return None, None, None


def half_kernel(b):
    """The kernels' own time of the 16-bit cuDNN baseline, or None."""
    return b.b16_kernel if b.b16 is not None else b.f16_kernel


def candidate_rows(db, exp, name, run_id, target_id, spec, workload_id, base):
    """The padded / memoized candidates' rows (dicts with CSV_FIELDS)."""
    rows = []
    for c in db.all(
            "SELECT c.id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.cl, c.threads, p.time_ms, "
            "p.dram_bytes FROM candidates c LEFT JOIN predictions p ON p.candidate_id = c.id "
            "AND p.gpu_spec = ? WHERE c.workload_id = ? AND c.strategy != 'layerwise' "
            "ORDER BY c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.cl, c.threads", spec,
            workload_id):
        m = db.latest(c[0], target_id)
        if not m:
            continue
        ok = m[1] == "ok"
        d = db.dram(m[0]) if ok else None
        t = m[2] if ok else None
        _, h, h_warm = half(base)
        rows.append(dict(
            experiment=exp, group=name, kernel=f"{c[1]} {brick_label(*c[2:9])}", kind=c[1],
            status=m[1], max_rel_error=m[4], time_ms=t,
            kernel_ms=db.counter(m[0], "kernel_time_ms") if ok else None, cudnn_fp32_ms=base.fp32,
            cudnn_tf32_ms=base.tf32, vs_cudnn_fp32=ratio(t, base.fp32),
            vs_cudnn_tf32=ratio(t, base.tf32), vs_cudnn_fp32_warm=ratio(t, base.fp32_warm),
            vs_cudnn_tf32_warm=ratio(t, base.tf32_warm), cudnn_16bit_ms=h,
            vs_cudnn_16bit=ratio(t, h), vs_cudnn_16bit_warm=ratio(t, h_warm), dram_mb=d and d / 1e6,
            model_dram_mb=c[10] and c[10] / 1e6, dram_over_model=ratio(d, c[10]), model_ms=c[9],
            time_over_model=ratio(t, c[9]), error=(m[3] or "").splitlines()[0][:160]
            if m[3] else ""))
    return rows


def baseline_rows(exp, name, b):
    rows = []
    if b.source == "missing":
        return [dict(experiment=exp, group=name, kernel="cuDNN layerwise", kind="cudnn",
                     status="missing", error="no ok layerwise measurement of every layer")]
    h_label, h, h_warm = half(b)
    pairs = ((("layerwise (no cuDNN)", b.fp32, None, None),) if b.plain else
             (("cuDNN fp32 (strict)", b.fp32, b.fp32_warm, b.fp32_kernel),
              ("cuDNN tf32", b.tf32, b.tf32_warm, b.tf32_kernel)) +
             ((("cuDNN " + h_label, h, h_warm, half_kernel(b)),) if h_label else ()))
    for label, t, warm, kernel in pairs:
        rows.append(dict(experiment=exp, group=name, kernel=label, kind="cudnn", status="ok"
                         if t is not None else "missing", time_ms=t, kernel_ms=kernel,
                         cudnn_fp32_ms=b.fp32,
                         cudnn_tf32_ms=b.tf32, vs_cudnn_fp32=ratio(t, b.fp32),
                         vs_cudnn_tf32=ratio(t, b.tf32), cudnn_16bit_ms=h,
                         vs_cudnn_16bit=ratio(t, h), dram_mb=b.dram and b.dram / 1e6,
                         model_dram_mb=b.model_dram and b.model_dram / 1e6,
                         dram_over_model=ratio(b.dram, b.model_dram), model_ms=b.model_ms,
                         time_over_model=ratio(t, b.model_ms),
                         error=f"{b.source}; warm {fmt(warm)} ms"))
    if b.plain:
        return rows
    rows.append(dict(experiment=exp, group=name, kernel="own layerwise", kind="own layerwise",
                     status="ok" if b.own is not None else "wrong_result or missing",
                     max_rel_error=b.own_error, time_ms=b.own, kernel_ms=b.own_kernel,
                     cudnn_fp32_ms=b.fp32,
                     cudnn_tf32_ms=b.tf32, vs_cudnn_fp32=ratio(b.own, b.fp32),
                     vs_cudnn_tf32=ratio(b.own, b.tf32), cudnn_16bit_ms=h,
                     vs_cudnn_16bit=ratio(b.own, h), error=f"warm {fmt(b.own_warm)} ms"))
    return rows


def shown_groups(db, run_id):
    """A run's merged groups, one per workload: measurements belong to a workload, so groups
    of the same shapes (ResNet-50's layer1.1 and layer1.2 blocks) share them and would repeat
    the same rows and counts. The one shown is the labelled group (an experiment's subgraph)
    if the workload has one, else the first; in layer order."""
    groups = db.all("SELECT first_layer, last_layer, workload_id, layer_names, label "
                    "FROM run_groups WHERE run_id = ? AND last_layer > first_layer "
                    "ORDER BY label = '', first_layer, last_layer", run_id)
    by_workload = {}
    for group in groups:
        by_workload.setdefault(group[2], group)
    return sorted(by_workload.values(), key=lambda g: (g[0], g[1]))


def collect(db):
    """Every summary row, over each experiment's latest run (CSV_FIELDS dicts)."""
    rows = []
    for run_id, exp, target_id, spec in db.all(
            "SELECT id, experiment, target_id, gpu_spec FROM runs WHERE id IN "
            "(SELECT MAX(id) FROM runs GROUP BY experiment) ORDER BY id"):
        for first, last, wid, names, label in shown_groups(db, run_id):
            name = label or names
            cands = candidate_rows(db, exp, name, run_id, target_id, spec, wid, Baseline())
            if not cands:
                continue
            base = group_baseline(db, run_id, target_id, spec, wid, first, last)
            rows += baseline_rows(exp, name, base)
            rows += candidate_rows(db, exp, name, run_id, target_id, spec, wid, base)
    return rows


def print_table(rows):
    header = ("experiment: group", "kernel", "status", "max err", "ms", "/cuDNN fp32",
              "/cuDNN tf32", "/cuDNN 16-bit", "DRAM MB", "model MB", "DRAM/model", "ms/model")
    table = [(f"{r['experiment']}: {r['group']}", r["kernel"], r["status"],
              fmt(r.get("max_rel_error"), "{:.1e}"), fmt(r.get("time_ms")),
              fmt(r.get("vs_cudnn_fp32"), "{:.2f}"), fmt(r.get("vs_cudnn_tf32"), "{:.2f}"),
              fmt(r.get("vs_cudnn_16bit"), "{:.2f}"),
              fmt(r.get("dram_mb"), "{:.1f}"), fmt(r.get("model_dram_mb"), "{:.1f}"),
              fmt(r.get("dram_over_model"), "{:.2f}"), fmt(r.get("time_over_model"), "{:.2f}"))
             for r in rows]
    widths = [max(len(str(x[i])) for x in table + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    last_group = None
    for r, t in zip(rows, table):
        g = t[0]
        shown = (g if g != last_group else "",) + t[1:]
        last_group = g
        print("  ".join(str(v).ljust(w) for v, w in zip(shown, widths)).rstrip())


def kind_lines(rows):
    """One line per kernel kind: validated count, best ratios, DRAM over model."""
    out = []
    for kind in KINDS:
        rs = [r for r in rows if r["kind"] == kind]
        if not rs:
            out.append(f"{kind}: not measured")
            continue
        ok = [r for r in rs if r["status"] == "ok"]
        best32 = min((r["vs_cudnn_fp32"] for r in ok if r.get("vs_cudnn_fp32")), default=None)
        best_tf = min((r["vs_cudnn_tf32"] for r in ok if r.get("vs_cudnn_tf32")), default=None)
        best16 = min((r["vs_cudnn_16bit"] for r in ok if r.get("vs_cudnn_16bit")), default=None)
        dm = [r["dram_over_model"] for r in ok if r.get("dram_over_model")]
        b16 = f", / cuDNN 16-bit {best16:.2f}" if best16 is not None else ""
        out.append(f"{kind}: {len(ok)}/{len(rs)} validated and timed; best time / cuDNN fp32 "
                   f"{fmt(best32, '{:.2f}')}, / cuDNN tf32 {fmt(best_tf, '{:.2f}')}{b16}; DRAM / "
                   f"model median {fmt(statistics.median(dm) if dm else None, '{:.2f}')} "
                   f"(n={len(dm)})")
    return out


def verdicts(rows):
    out = []
    groups = {}
    for r in rows:
        groups.setdefault((r["experiment"], r["group"]), []).append(r)
    for (exp, group), rs in groups.items():
        merged = [r for r in rs if r["kind"] in ("padded", "memoized") and r["status"] == "ok"]
        # The first cuDNN row with a time (a bf16 / fp16 run has no strict-FP32 one).
        base = next((r for r in rs if r["kind"] == "cudnn" and r.get("time_ms") is not None),
                    None)
        if not merged or not base or base.get("time_ms") is None:
            out.append(f"{exp}: {group}: no verdict (no validated merged kernel or no cuDNN "
                       "baseline)")
            continue
        best = min(merged, key=lambda r: r["time_ms"])
        fewer = (best.get("dram_mb") is not None and base.get("dram_mb") is not None and
                 best["dram_mb"] < base["dram_mb"])
        out.append(f"{exp}: {group}: best {best['kernel']} {best['time_ms']:.3f} ms = "
                   f"{fmt(best.get('vs_cudnn_fp32'), '{:.2f}')}x cuDNN fp32, "
                   f"{fmt(best.get('vs_cudnn_tf32'), '{:.2f}')}x cuDNN tf32"
                   + (f", {best['vs_cudnn_16bit']:.2f}x cuDNN 16-bit (warm "
                      f"{fmt(best.get('vs_cudnn_16bit_warm'), '{:.2f}')}x)"
                      if best.get("vs_cudnn_16bit") is not None else "") +
                   f" (cold; warm: "
                   f"{fmt(best.get('vs_cudnn_fp32_warm'), '{:.2f}')}x, "
                   f"{fmt(best.get('vs_cudnn_tf32_warm'), '{:.2f}')}x); fewer DRAM bytes "
                   f"than cuDNN: {'yes' if fewer else 'no' if best.get('dram_mb') else 'unknown'}"
                   f"; DRAM / model {fmt(best.get('dram_over_model'), '{:.2f}')}"
                   f"; kernel / wall time "
                   f"{fmt(ratio(best.get('kernel_ms'), best['time_ms']), '{:.2f}')} (cuDNN "
                   f"{fmt(ratio(base.get('kernel_ms'), base['time_ms']), '{:.2f}')})")
    return out


def failure_lines(db):
    out = []
    for status, n, error in db.all(
            "SELECT status, COUNT(*), MIN(error) FROM measurements WHERE status != 'ok' "
            "GROUP BY status ORDER BY status"):
        first = (error or "").splitlines()[0][:200] if error else ""
        out.append(f"{status}: {n}" + (f" (e.g. {first})" if first else ""))
    return out or ["none"]


def baseline_lines(db):
    return [f"{model} batch {batch} {prec} {fw}: {med:.3f} ms on {fp}" for model, batch, prec, fw,
            med, fp in db.all(
                "SELECT b.model, b.batch, b.precision, b.framework, b.median_ms, t.fingerprint "
                "FROM baselines b JOIN targets t ON t.id = b.target_id ORDER BY b.model, "
                "b.framework")] or ["none"]


def device_lines(path):
    if not path:
        return []
    try:
        with open(path) as f:
            text = f.read()
        if not text.strip():
            return ["device: not recorded (brickdl-device found no GPU: see env.txt)"]
        d = json.loads(text)
    except (OSError, ValueError) as e:
        return [f"device: {path} unreadable ({e})"]
    lines = [f"device: {d.get('name')} sm_{d.get('cc')}, {d.get('sm_count')} SMs, L2 "
             f"{d.get('l2_bytes', 0) / 2**20:.1f} MiB, max SM clock "
             f"{d.get('sm_clock_khz', 0) // 1000} MHz, DRAM {d.get('dram_peak_gbs', 0):.0f} GB/s "
             f"peak, driver {d.get('driver_version')}, cuDNN {d.get('cudnn_version')}, NVRTC "
             f"{d.get('nvrtc_version')}; spec {d.get('spec')}"]
    for diff in d.get("differences", []):
        lines.append(f"  differs from the spec: {diff['field']}: device {diff['device']:.6g}, "
                     f"spec {diff['spec']:.6g} {diff['unit']} (the model uses it for "
                     f"{diff['used_for']})")
    return lines


def stage_lines(path):
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return ["stages: " + ", ".join(line.strip() for line in f if line.strip())]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("db")
    p.add_argument("--device-json", help="brickdl-device --json output")
    p.add_argument("--stages", help="the run's stage log (one 'name status seconds' a line)")
    p.add_argument("--csv", help="also write every row to this CSV file")
    p.add_argument("--title", default="device run summary")
    a = p.parse_args(argv)
    try:
        db = Db(a.db)
        rows = collect(db)
    except (brickdl_store.StoreError, sqlite3.Error) as e:
        print(f"gpu_summary.py: {a.db}: {e}", file=sys.stderr)
        return 2
    print(f"== {a.title} ({a.db}) ==")
    for line in stage_lines(a.stages) + device_lines(a.device_json):
        print(line)
    print("ratios are time / baseline (below 1 is faster); max err is the largest relative "
          "error against the reference")
    if rows:
        print_table(rows)
    else:
        print("no measured merged groups in the database")
    print()
    for line in kind_lines(rows) + verdicts(rows):
        print(line)
    print("framework baselines: " + "; ".join(baseline_lines(db)))
    print("failures: " + "; ".join(failure_lines(db)))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({k: r.get(k) for k in CSV_FIELDS})
    return 0


if __name__ == "__main__":
    sys.exit(main())
