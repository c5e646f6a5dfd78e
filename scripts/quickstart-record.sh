#!/usr/bin/env bash
# Records the quick start's run on this machine for README.md (scripts/readme-blocks.py):
# ResNet-50 tuned twice with the default backend (without a GPU: the model's plan, validated
# on the CPU within the 60 s budget; the second run resumes), then brickdl-run --check of the
# first plan. About 8 minutes on 2 cores. Writes results/quickstart/resnet50-cpu.txt and
# rewrites README.md's generated blocks.
#
#   scripts/quickstart-record.sh [WORKDIR]       (default: out/quickstart)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/out/quickstart}
apps=${BRICKDL_BUILD_DIR:-$root/build}/apps
rm -rf "$work"
mkdir -p "$work"
cd "$root"
{
  echo "date: $(date -u +%Y-%m-%d)"
  echo "git: $(git rev-parse --short=12 HEAD)"
  echo "machine: a $(nproc)-core $(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -1 | cut -d' ' -f1-3) machine without a GPU"
} >"$work/meta.txt"
elapsed() { python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$1"; }
for i in 1 2; do
  t0=$(date +%s.%N)
  "$apps/brickdl-tune" experiments/resnet50.yaml --db "$work/qs.db" --out "$work/o$i" --quiet \
    >"$work/tune$i.txt" 2>&1
  echo "tune$i $(elapsed "$t0")" >>"$work/times.txt"
done
t0=$(date +%s.%N)
"$apps/brickdl-run" --model resnet50 --plan "$work/o1/plan.json" --out "$work/run" --check \
  >"$work/run.txt" 2>"$work/run.err"
echo "run $(elapsed "$t0")" >>"$work/times.txt"
python3 scripts/readme-blocks.py --record-quickstart "$work"
