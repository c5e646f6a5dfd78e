#!/usr/bin/env bash
# Reproduces the BrickDL paper's evaluation (Figs 7-11, and the model-accuracy Fig 12) with one
# command: tunes every figure experiment into one database, then draws the figures.
#
#   scripts/reproduce.sh [OUTDIR]            (default OUTDIR: out/reproduce)
#
# With an NVIDIA GPU (nvidia-smi lists one): every experiment at full size with the tuner's
# `auto` backend (the GPU), plus the framework baselines of experiments/baselines/ where
# PyTorch / JAX are installed. Without one: the seven models and the ResNet-50 subgraphs
# model-only (predictions, labelled "predicted (model)"), the two microbenchmarks measured
# on the CPU at a reduced size (labelled "measured (CPU)") and, for the comparison of the model
# with the paper, the same two model-only at the paper's size (a panel of their own in Figs
# 10-11); under 10 minutes on 2 cores.
#
# Environment: BRICKDL_REPRODUCE_MODE=gpu|cpu forces the mode; BRICKDL_BUILD_DIR (default
# build/) is where brickdl-tune is built (scripts/build.sh runs when it is missing);
# BRICKDL_MICRO_SIZE (default 64) and BRICKDL_MICRO_REPS (default 3) set the reduced
# microbenchmarks' cube edge and repetitions.
# Outputs: OUTDIR/brickdl.db, OUTDIR/figures/*.png|pdf|json and model_vs_paper.md (ours
# against both layerwise baselines and the paper's values), OUTDIR/figures/gpu/<run>/ (the
# committed device runs of results/gpu/, each drawn from its own database),
# OUTDIR/runs/<experiment>/ (plan and report of each tuning run), OUTDIR/reproduce.log (the
# command log).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/reproduce}
mkdir -p "$out/runs" "$out/experiments"
out=$(cd "$out" && pwd)
build=${BRICKDL_BUILD_DIR:-$root/build}
tune=$build/apps/brickdl-tune
db=$out/brickdl.db
log=$out/reproduce.log
: >"$log"

mode=${BRICKDL_REPRODUCE_MODE:-}
if [ -z "$mode" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    mode=gpu
  else
    mode=cpu
  fi
fi
case "$mode" in gpu | cpu) ;; *)
  echo "reproduce.sh: BRICKDL_REPRODUCE_MODE must be gpu or cpu, got '$mode'" >&2
  exit 2
  ;;
esac

if [ ! -x "$tune" ]; then
  echo "reproduce.sh: building brickdl into $build"
  BRICKDL_BUILD_DIR=$build "$root/scripts/build.sh"
fi

models=(resnet50 drn_c_26 resnet3d_34 darknet53 vgg16_bn deepcam inception_v4)
start_all=$SECONDS

# The database records each experiment's path as given: relative to the checkout, so that
# a database made here names no absolute path of this machine.
cd "$root"

# tune NAME EXPERIMENT_FILE [brickdl-tune flags...]: one tuning run into the shared database.
tune_one() {
  local name=$1 file
  file=$(realpath --relative-to="$root" "$2")
  shift 2
  local t0=$SECONDS
  echo "reproduce.sh: [$mode] $name ($*)"
  echo "+ brickdl-tune $file --db $db --out $out/runs/$name --quiet $*" >>"$log"
  if "$tune" "$file" --db "$db" --out "$out/runs/$name" --quiet "$@" >>"$log" 2>&1; then
    echo "reproduce.sh:   done in $((SECONDS - t0)) s"
  else
    local rc=$?
    echo "reproduce.sh:   FAILED (exit $rc) after $((SECONDS - t0)) s; see $log" >&2
    failures+=("$name")
  fi
}

failures=()
micro_size=${BRICKDL_MICRO_SIZE:-64}
micro_reps=${BRICKDL_MICRO_REPS:-3}
reduce="/usr/bin/python3 $root/results/reduce_experiment.py"
command -v /usr/bin/python3 >/dev/null 2>&1 || reduce="python3 $root/results/reduce_experiment.py"

if [ "$mode" = gpu ]; then
  for m in "${models[@]}"; do
    tune_one "$m" "$root/experiments/$m.yaml" --backend auto
  done
  tune_one fig8_resnet50_subgraphs "$root/experiments/fig8_resnet50_subgraphs.yaml" \
    --backend auto
  for m in micro_graphsize micro_bricksize; do
    # Every feasible candidate of the partitions' groups is measured (the experiments'
    # `partitions` select the partitions searcher; --top-k is its depth per group).
    tune_one "$m" "$root/experiments/$m.yaml" --backend auto --top-k 1000
  done
  # Framework baselines (Fig 7) where the frameworks are installed; exit 3 = unavailable.
  for script in pytorch_eager torch_compile jax_xla; do
    for m in "${models[@]}"; do
      set +e
      python3 "$root/experiments/baselines/$script.py" "$root/experiments/$m.yaml" \
        --db "$db" >>"$log" 2>&1
      rc=$?
      set -e
      if [ $rc -eq 3 ]; then
        echo "reproduce.sh: $script unavailable here (see $log); skipping its baselines"
        break
      elif [ $rc -ne 0 ]; then
        echo "reproduce.sh: $script $m FAILED (exit $rc); see $log" >&2
        failures+=("$script:$m")
      fi
    done
  done
else
  for m in "${models[@]}"; do
    tune_one "$m" "$root/experiments/$m.yaml" --backend none
  done
  tune_one fig8_resnet50_subgraphs "$root/experiments/fig8_resnet50_subgraphs.yaml" \
    --backend none
  # The microbenchmarks measured on the CPU at a reduced size: the same chains on
  # ${micro_size}^3 instead of 112^3 / 224^3, fewer repetitions, every feasible candidate of
  # the partitions' groups measured.
  for m in micro_graphsize micro_bricksize; do
    reduced=$out/experiments/$m.yaml
    $reduce "$root/experiments/$m.yaml" "$reduced" \
      "input_size=[$micro_size, $micro_size, $micro_size]" \
      "measurement.repetitions=$micro_reps" "measurement.warmup=1" "measurement.budget_s=0"
    tune_one "$m" "$reduced" --backend cpu --top-k 1000
  done
  # The same two chains model-only at the paper's size (112^3 / 224^3) for the paper's GPU
  # spec: Figs 10-11 draw these runs (backend none) as the panel "model, A100-40GB, full size"
  # beside the measured one. Seconds each.
  for m in micro_graphsize micro_bricksize; do
    tune_one "$m-full-size-model" "$root/experiments/$m.yaml" --backend none
  done
fi

echo "reproduce.sh: drawing the figures"
"$root/results/brickdl-figures" "$db" "$out/figures" | tee -a "$log"
# The committed device runs (results/gpu/<date>-<gpu>/brickdl.db, from scripts/device/run.sh):
# what they measured on a GPU, each drawn on its own (Figs 11 and 12: the Fig 11
# microbenchmark and predicted vs measured), in OUTDIR/figures/gpu/<date>-<gpu>/.
for gpu_db in "$root"/results/gpu/*/brickdl.db; do
  [ -f "$gpu_db" ] || continue
  name=$(basename "$(dirname "$gpu_db")")
  echo "reproduce.sh: drawing the device run $name"
  "$root/results/brickdl-figures" "$gpu_db" "$out/figures/gpu/$name" \
    --only fig11,fig12 | tee -a "$log" || failures+=("figures:$name")
done
echo "reproduce.sh: $mode mode, $((SECONDS - start_all)) s in all; database $db, figures" \
  "$out/figures"
if ((${#failures[@]})); then
  echo "reproduce.sh: failed: ${failures[*]}" >&2
  exit 1
fi
