#!/usr/bin/env bash
# The model-only end-to-end speedups of README's table (section "Model-only speedups"): every
# experiment below tuned with `--backend none` for each GPU spec and precision, into one
# database; then results/model_speedups.py writes the committed record and
# scripts/readme-blocks.py the README table from it. Predictions only: nothing is measured.
#
#   scripts/model-speedups.sh [OUTDIR]          (default OUTDIR: out/model-speedups)
#
# Environment: BRICKDL_BUILD_DIR (default build/) holds brickdl-tune (scripts/build.sh
# brickdl-tune runs when it is missing). About a minute on two cores.
# Outputs: OUTDIR/brickdl.db, OUTDIR/runs/<experiment>-<gpu>-<precision>/ (plan and report),
# OUTDIR/model-speedups.log (the tuner's closing lines),
# results/model/speedups.csv, README.md's generated table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/model-speedups}
build=${BRICKDL_BUILD_DIR:-$root/build}
tune=$build/apps/brickdl-tune
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
db=$out/brickdl.db
log=$out/model-speedups.log
rm -f "$db" "$db-wal" "$db-shm"
: >"$log"

if [ ! -x "$tune" ]; then
  echo "model-speedups.sh: building brickdl-tune into $build"
  BRICKDL_BUILD_DIR=$build "$root/scripts/build.sh" brickdl-tune
fi

# The seven models of the paper's Fig 7 with 3D ResNet-34's search before brick depths
# (resnet3d_34_cubes) beside the current one, and issue 32's zoo.
experiments=(resnet50 drn_c_26 resnet3d_34 resnet3d_34_cubes darknet53 vgg16_bn deepcam
  inception_v4 mobilenet_v2 efficientnet_b0 convnext_tiny)
gpus=(A100-40GB H200)
precisions=(tf32 bf16)

cd "$root" # experiment paths recorded relative to the checkout
for e in "${experiments[@]}"; do
  for g in "${gpus[@]}"; do
    for p in "${precisions[@]}"; do
      echo "+ brickdl-tune experiments/$e.yaml --backend none --target $g --precision $p" >>"$log"
      "$tune" "experiments/$e.yaml" --backend none --target "$g" --precision "$p" --db "$db" \
        --out "$out/runs/$e-$g-$p" --quiet >>"$log" 2>&1 || {
        echo "model-speedups.sh: $e on $g in $p FAILED; see $log" >&2
        exit 1
      }
    done
  done
  echo "model-speedups.sh: $e done"
done
mkdir -p "$root/results/model"
python3 "$root/results/model_speedups.py" "$db" "$root/results/model/speedups.csv"
python3 "$root/scripts/readme-blocks.py"
