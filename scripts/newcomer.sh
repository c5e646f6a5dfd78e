#!/usr/bin/env bash
# A newcomer's tour of brickdl, from a fresh database to the answers: tune, best, show, compare,
# predicted vs measured, export, merge. Every command is printed before it runs and its output
# kept in OUTDIR/NN-name.txt, so the tour doubles as a test (tests/cli/newcomer_test.py checks
# that no output holds a placeholder, an unlabelled mix of targets, or a validation as a time).
#
#   scripts/newcomer.sh [OUTDIR]          (default: out/newcomer; about half a minute here)
#
# brickdl is taken from ${BRICKDL_BUILD_DIR:-build}/apps (scripts/build.sh builds it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/newcomer}
apps=${BRICKDL_BUILD_DIR:-$root/build}/apps
for tool in brickdl-tune brickdl-query; do
  if [ ! -x "$apps/$tool" ]; then
    echo "newcomer.sh: $apps/$tool is missing; build first (scripts/build.sh)" >&2
    exit 2
  fi
done
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
db=$out/tour.db
cd "$root"
step=0

# run NAME COMMAND...: one step of the tour, printed, its output (stdout and stderr) kept.
run() {
  local name=$1
  shift
  step=$((step + 1))
  local file
  file=$(printf '%s/%02d-%s.txt' "$out" "$step" "$name")
  echo "\$ ${*/#$apps\//}" | tee "$file.cmd"
  if ! "$@" >"$file" 2>&1; then
    echo "newcomer.sh: step $step ($name) failed; its output:" >&2
    cat "$file" >&2
    exit 1
  fi
}

tune=$apps/brickdl-tune
query=$apps/brickdl-query
small=experiments/micro_graphsize_cpu.yaml

# 1. Tune: a small 3-D chain measured on this CPU, twice (the second resumes from the database
# and measures one partition again), ResNet-50 model-only for two GPUs (a command-line
# override, no copied YAML), and an inline graph with the default backend (a GPU if there is
# one; else the model's plan, validated on the CPU).
run tune-cpu "$tune" "$small" --backend cpu --db "$db" --out "$out/runs/cpu" --quiet
run tune-cpu-again "$tune" "$small" --backend cpu --db "$db" --out "$out/runs/cpu-again" \
  --quiet --top-k 6
run tune-a100 "$tune" experiments/resnet50.yaml --backend none --db "$db" --out "$out/runs/a100" \
  --quiet
run tune-h200 "$tune" experiments/resnet50.yaml --target H200 --precision tf32 --backend none \
  --db "$db" --out "$out/runs/h200" --quiet
run tune-subgraphs "$tune" experiments/fig8_resnet50_subgraphs.yaml --backend none --db "$db" \
  --out "$out/runs/fig8" --quiet
run tune-inline "$tune" experiments/inline_resblock.yaml --db "$db" --out "$out/runs/inline" --quiet

# 2. Ask.
run runs "$query" --db "$db" runs
run best "$query" --db "$db" best
run best-json "$query" --db "$db" best --json
run best-layer "$query" --db "$db" best --model resnet50 --gpu H200 --precision tf32 \
  --layer layer3.0.conv2
run show-cpu "$query" --db "$db" show 1
run show-validation "$query" --db "$db" show 6
run compare "$query" --db "$db" compare 1 2
run compare-own "$query" --db "$db" compare 1 2 --own
run accuracy "$query" --db "$db" accuracy
run accuracy-json "$query" --db "$db" accuracy --json
run export "$query" --db "$db" export --format csv --out "$out/export.csv"
run merge "$query" merge "$out/merged.db" "$db"
run best-merged "$query" --db "$out/merged.db" best --source measured
echo "newcomer.sh: $step steps, outputs in $out"
