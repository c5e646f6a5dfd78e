#!/usr/bin/env bash
# The device check of the CUDA backend, for a machine with an NVIDIA GPU:
#
#   scripts/gpu-check.sh OUTDIR
#
#   1. finds the GPU (nvidia-smi) and its compute capability; without one it says so and
#      exits 3 before building anything
#   2. builds brickdl for that architecture only (CUDA on), the tuner and the kernel tests
#   3. runs the kernel tests: host emulation, NVRTC / CUPTI host API, and the device tests
#      (which must run, not skip, here)
#   4. tunes the Fig 11 microbenchmark (experiments/micro_bricksize.yaml) and ResNet-50's first
#      two bottleneck blocks (experiments/gpu_check_resnet50.yaml) with the cuda backend, both
#      predicted for this GPU's spec, into OUTDIR/brickdl.db
#   5. prints a summary table LAST: per merged group, the cuDNN layer-by-layer baseline and
#      every measured candidate (time, DRAM bytes, ratios to cuDNN strict FP32 and TF32, and
#      to the model's predictions)
#
# Logs, the database and summary.txt go to OUTDIR. Exit status: 0 all fine, 1 the build or the
# tests failed, 2 bad usage, 3 no GPU, 4 a tuning run failed. Meant to finish within 8 minutes
# on an H200. Environment: BRICKDL_BUILD_DIR (default <repo>/build-gpu-check), BRICKDL_JOBS.
set -uo pipefail

usage() { echo "usage: $0 OUTDIR" >&2; exit 2; }
[ $# -eq 1 ] || usage
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
mkdir -p "$out" || usage
out=$(cd "$out" && pwd)
build=${BRICKDL_BUILD_DIR:-$root/build-gpu-check}
jobs=${BRICKDL_JOBS:-$(nproc 2>/dev/null || echo 4)}
t_start=$(date +%s)
step() { echo "gpu-check: [$(( $(date +%s) - t_start ))s] $*"; }

# ---- 1. the GPU ----------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU found (nvidia-smi is not installed); nothing was built or run" >&2
  exit 3
fi
if ! gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total \
                      --format=csv,noheader -i 0 2>&1) || [ -z "$gpu" ]; then
  echo "gpu-check: no NVIDIA GPU found (nvidia-smi: ${gpu:-no output}); nothing was built or run" >&2
  exit 3
fi
gpu_name=$(echo "$gpu" | cut -d, -f1 | sed 's/^ *//;s/ *$//')
cc=$(echo "$gpu" | cut -d, -f2 | tr -d ' ')
arch=${cc/./}
case "$gpu_name" in
  *H200*) spec=H200 ;;
  *H100*) spec=H100-SXM ;;
  *A100*80*) spec=A100-80GB ;;
  *A100*) spec=A100-40GB ;;
  *) spec=H200 ;;  # predictions for a named spec; ratios to the model are then only indicative
esac
step "GPU 0: $gpu (sm_$arch); model spec $spec"
echo "$gpu" > "$out/gpu.txt"

# ---- 2. build ------------------------------------------------------------------------------
step "building into $build (log: $out/build.log)"
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRICKDL_ENABLE_CUDA=ON \
         -DCMAKE_CUDA_ARCHITECTURES="$arch" -DBRICKDL_BUILD_BENCHMARKS=OFF &&
       cmake --build "$build" -j"$jobs" --target brickdl-tune cuda_host_tests \
         cuda_toolkit_tests cuda_device_tests; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log" >&2
  echo "gpu-check: FAILED: the build (see $out/build.log)" >&2
  exit 1
fi

# ---- 3. tests ------------------------------------------------------------------------------
failed=0
export BRICKDL_CACHE_DIR="$build/nvrtc-cache"  # compiled kernels, reused by later checks
for t in cuda_host_tests cuda_toolkit_tests cuda_device_tests; do
  step "running $t"
  if ! "$build/tests/device/$t" > "$out/$t.log" 2>&1; then
    tail -30 "$out/$t.log" >&2
    echo "gpu-check: FAILED: $t (see $out/$t.log)" >&2
    failed=1
  fi
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.log" | sed "s/^/  $t: /"
done
if grep -q '^\[  SKIPPED \]' "$out/cuda_device_tests.log"; then
  echo "gpu-check: FAILED: device tests were skipped on a machine with a GPU" >&2
  grep -A1 'Skipped$' "$out/cuda_device_tests.log" | head -6 >&2
  failed=1
fi
[ $failed -eq 0 ] || exit 1

# ---- 4. tuning -----------------------------------------------------------------------------
tune_status=0
tune() {  # tune NAME YAML
  local name=$1 yaml=$2
  # Predict for this GPU's spec, not the paper's A100; cap the measuring time when the file
  # sets no budget of its own.
  sed -E "s/^(  gpu: )[A-Za-z0-9-]+/\1$spec/" "$yaml" > "$out/$name.yaml"
  grep -q '^  budget_s:' "$out/$name.yaml" ||
    sed -i 's/^measurement:.*/&\n  budget_s: 150/' "$out/$name.yaml"
  step "tuning $name (log: $out/$name.log)"
  if ! timeout 330 "$build/apps/brickdl-tune" "$out/$name.yaml" --backend cuda \
        --db "$out/brickdl.db" --out "$out/$name" > "$out/$name.log" 2>&1; then
    tail -20 "$out/$name.log" >&2
    echo "gpu-check: tuning $name failed or timed out (see $out/$name.log)" >&2
    tune_status=4
  fi
}
tune micro_bricksize "$root/experiments/micro_bricksize.yaml"
tune gpu_check_resnet50 "$root/experiments/gpu_check_resnet50.yaml"
tune gpu_check_resnet50_tf32 "$root/experiments/gpu_check_resnet50_tf32.yaml"

# ---- 5. summary (last) -----------------------------------------------------------------------
step "summary (also in $out/summary.txt)"
if ! command -v python3 >/dev/null 2>&1; then
  echo "gpu-check: python3 is missing: no summary; the database is $out/brickdl.db" >&2
  exit 4
fi
python3 - "$out/brickdl.db" "$gpu_name" <<'PYEOF' | tee "$out/summary.txt"
import sqlite3, sys

db = sqlite3.connect(sys.argv[1])
gpu = sys.argv[2]

def one(sql, *args):
    row = db.execute(sql, args).fetchone()
    return row[0] if row else None

def latest(candidate_id, target_id):
    return db.execute(
        "SELECT id, status, median_ms, error FROM measurements WHERE candidate_id = ? AND "
        "target_id = ? ORDER BY id DESC LIMIT 1", (candidate_id, target_id)).fetchone()

def counter(mid, name):
    return one("SELECT value FROM counters WHERE measurement_id = ? AND name = ?", mid, name)

def dram(mid):
    r, w = counter(mid, "dram__bytes_read.sum"), counter(mid, "dram__bytes_write.sum")
    return None if r is None or w is None else r + w

def fmt(v, spec="{:.3f}"):
    return "-" if v is None else spec.format(v)

def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b

header = ("group", "kernel", "status", "time ms", "DRAM MB", "model MB", "DRAM/model",
          "vs cuDNN fp32", "vs cuDNN tf32", "time/model")
rows, verdicts = [], []
for run_id, exp, target_id, spec in db.execute(
        "SELECT id, experiment, target_id, gpu_spec FROM runs WHERE id IN "
        "(SELECT MAX(id) FROM runs GROUP BY experiment) ORDER BY id"):
    groups = db.execute(
        "SELECT first_layer, last_layer, workload_id, layer_names, label FROM run_groups "
        "WHERE run_id = ? AND last_layer > first_layer ORDER BY first_layer, last_layer",
        (run_id,)).fetchall()
    for first, last, wid, names, label in groups:
        cands = db.execute(
            "SELECT c.id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.threads, p.time_ms, "
            "p.dram_bytes FROM candidates c LEFT JOIN predictions p ON p.candidate_id = c.id "
            "AND p.gpu_spec = ? WHERE c.workload_id = ? ORDER BY c.strategy, c.bh",
            (spec, wid)).fetchall()
        measured = [(c, latest(c[0], target_id)) for c in cands]
        measured = [(c, m) for c, m in measured if m]
        if not measured:
            continue
        # cuDNN layer by layer = the singleton groups' layerwise measurements, summed.
        fp32, tf32, base_dram = 0.0, [], []
        base_pred = base_pred_dram = 0.0
        complete = True
        for layer in range(first, last + 1):
            single = db.execute(
                "SELECT c.id, p.time_ms, p.dram_bytes FROM run_groups g JOIN candidates c ON "
                "c.workload_id = g.workload_id AND c.strategy = 'layerwise' LEFT JOIN predictions "
                "p ON p.candidate_id = c.id AND p.gpu_spec = ? WHERE g.run_id = ? AND "
                "g.first_layer = ? AND g.last_layer = ?", (spec, run_id, layer, layer)).fetchone()
            m = latest(single[0], target_id) if single else None
            if not m or m[1] != "ok":
                complete = False
                continue
            fp32 += m[2]
            tf32.append(counter(m[0], "variant.cudnn_tf32_ms"))
            base_dram.append(dram(m[0]))
            base_pred += single[1] or 0
            base_pred_dram += single[2] or 0
        # A sum only when every layer has the number.
        tf32 = sum(tf32) if complete and None not in tf32 else None
        base_dram = sum(base_dram) if complete and None not in base_dram else None
        if not complete:
            fp32 = None
        name = f"{exp}: {label or names}"
        rows.append((name, "cuDNN layerwise", "ok" if complete else "missing", fmt(fp32),
                     fmt(base_dram and base_dram / 1e6, "{:.1f}"), fmt(base_pred_dram / 1e6, "{:.1f}"),
                     fmt(ratio(base_dram, base_pred_dram), "{:.2f}"), "1.00",
                     fmt(ratio(fp32, tf32), "{:.2f}"), fmt(ratio(fp32, base_pred), "{:.2f}")))
        best = None
        for c, m in measured:
            cid, strat, bd, bh, bw, cb, bn, threads, pred_ms, pred_dram = c
            brick = (f"{bd}x" if bd > 1 else "") + f"{bh}x{bw}" + (f"/c{cb}" if cb else "") + \
                (f"/n{bn}" if bn > 1 else "")
            ok = m[1] == "ok"
            d = dram(m[0]) if ok else None
            rows.append(("", f"{strat} {brick} t{threads}", m[1], fmt(m[2] if ok else None),
                         fmt(d and d / 1e6, "{:.1f}"), fmt(pred_dram and pred_dram / 1e6, "{:.1f}"),
                         fmt(ratio(d, pred_dram), "{:.2f}"), fmt(ratio(m[2], fp32) if ok else None, "{:.2f}"),
                         fmt(ratio(m[2], tf32) if ok else None, "{:.2f}"),
                         fmt(ratio(m[2], pred_ms) if ok else None, "{:.2f}")))
            if ok and (best is None or m[2] < best[1]):
                best = (f"{strat} {brick}", m[2], d, pred_dram)
        if best and fp32:
            faster = best[1] < fp32
            fewer = best[2] is not None and base_dram and best[2] < base_dram
            within = best[2] is not None and best[3] and abs(best[2] / best[3] - 1) <= 0.15
            verdicts.append(
                f"{name}: best {best[0]} {best[1]:.3f} ms = {best[1] / fp32:.2f}x cuDNN fp32"
                + (f", {best[1] / tf32:.2f}x cuDNN tf32" if tf32 else "")
                + f"; faster than fp32: {'yes' if faster else 'NO'}"
                + f"; fewer DRAM bytes: {'yes' if fewer else 'NO' if best[2] else 'unknown'}"
                + f"; DRAM within 15% of model: {'yes' if within else 'NO' if best[2] else 'unknown'}")

widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
print(f"GPU check summary on {gpu} (ratios are time / baseline: below 1 is faster)")
print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
print("  ".join("-" * w for w in widths))
for r in rows:
    print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
print()
for v in verdicts:
    print(v)
if not rows:
    print("no measured groups in the database")
PYEOF
step "done"
exit $tune_status
