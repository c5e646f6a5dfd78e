#!/usr/bin/env bash
# The kernels the device bundle carries compiled (scripts/device-bundle.sh step 6), compiled for
# the H200's sm_90a into an NVRTC cache folder, in two lanes on the CPU cores:
#   - brickdl-precompile: the generated kernels of the experiments run.sh tunes, each predicted
#     for the H200 as run.sh does on one (its tf32 and bf16 sets take a minute each here);
#   - cuda_device_test_kernels: the device tests' kernels (tests/device/device_cases.h);
#   - brickdl-calibrate --precompile: its convs, so its stage measures and does not compile.
# Each tool fails on a kernel that does not compile or that ptxas flags, naming it: a performance
# advisory (C75xx) or a stack frame of 128 bytes or more (spills); so does this script, after both
# lanes have finished. The ctest bundle_kernels_compile_clean runs it into a fresh cache.
#
#   scripts/device/precompile.sh BUILD CACHE_DIR      (the tools' lines on stdout)
#
# Exit status: 0 every kernel compiled and none flagged; 1 some did not compile or were flagged;
# 2 bad usage.
set -uo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BUILD CACHE_DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
cache=$2
# The experiments run.sh tunes (device-bundle.sh copies them into the bundle).
tuned=(experiments/gpu_check_resnet50.yaml experiments/gpu_check_resnet50_tf32.yaml
  experiments/gpu_check_resnet50_bf16.yaml experiments/micro_bricksize.yaml)
tools=("$build/apps/brickdl-precompile" "$build/tests/device/cuda_device_test_kernels")
[ -x "$build/apps/brickdl-calibrate" ] && tools+=("$build/apps/brickdl-calibrate")
for t in "${tools[@]}"; do
  [ -x "$t" ] || { echo "precompile: $t is missing (build it first)" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "${tuned[@]}"; do # predicted for the H200, as run.sh does on one
  sed -E "s/^(  gpu: )[A-Za-z0-9-]+/\1H200/" "$root/$f" >"$tmp/$(basename "$f")"
done
mkdir -p "$cache"
# Two lanes of about equal length (the tf32 and bf16 experiments are the long ones).
# Each lane runs all its tools (every failure is named) and fails if one of them did.
(
  rc=0
  "$build/apps/brickdl-precompile" --arch 90 --cache "$cache" "$tmp/gpu_check_resnet50_tf32.yaml" \
    "$tmp/gpu_check_resnet50.yaml" "$tmp/micro_bricksize.yaml" || rc=1
  if [ -x "$build/apps/brickdl-calibrate" ]; then
    "$build/apps/brickdl-calibrate" --spec H200 --precompile "$cache" || rc=1
  fi
  exit $rc
) >"$tmp/lane1" 2>&1 &
lane1=$!
(
  rc=0
  "$build/apps/brickdl-precompile" --arch 90 --cache "$cache" "$tmp/gpu_check_resnet50_bf16.yaml" ||
    rc=1
  "$build/tests/device/cuda_device_test_kernels" --arch 90 --spec H200 --cache "$cache" || rc=1
  exit $rc
) >"$tmp/lane2" 2>&1 &
lane2=$!
rc=0
wait $lane1 || rc=1
wait $lane2 || rc=1
# The lines name the copied experiments' folder; say the checkout's paths instead.
sed "s|$tmp/|experiments/|g" "$tmp/lane1" "$tmp/lane2"
[ $rc -eq 0 ] || echo "precompile: FAILED: a kernel did not compile or was flagged by ptxas (above)"
exit $rc
