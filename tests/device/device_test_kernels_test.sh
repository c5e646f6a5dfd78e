#!/usr/bin/env bash
# cuda_device_test_kernels (ctest device_test_kernels_cache): the cluster test's kernels (the
# smallest set of device_cases.h) compiled ahead fill the NVRTC disk cache, and a second run
# finds every one of them there; an unknown test name is bad input naming the known ones.
#
#   tests/device/device_test_kernels_test.sh CUDA_DEVICE_TEST_KERNELS
set -uo pipefail
tool=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "device_test_kernels_cache: FAILED: $*"; exit 1; }
test=Device.ClusterKernelsMatchTheirHostEmulation
first=$("$tool" --arch 90 --cache "$tmp/cache" --test "$test") || fail "first run exited $?"
echo "$first"
n=$(echo "$first" | sed -n "s/^cuda_device_test_kernels: $test (H200, sm_90): \([0-9]*\) compiled in .*, 0 failed to compile, 0 flagged by ptxas$/\1/p")
# 2 precisions x 3 cluster sizes, none refused (device_cases.h cluster_cases)
[ "$n" = 6 ] || fail "expected 6 kernels compiled for $test"
[ "$(find "$tmp/cache" -name '*_sm90.cubin' | wc -l)" -eq 6 ] ||
  fail "the cache holds $(ls "$tmp/cache" | wc -l) files, not 6 sm_90 cubins"
second=$("$tool" --arch 90 --cache "$tmp/cache" --test "$test") || fail "second run exited $?"
echo "$second"
echo "$second" | grep -q ": 0 compiled in .* 6 already cached" || fail "the second run compiled again"
"$tool" --cache "$tmp/cache" --test Device.Nope 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "no device test 'Device.Nope'.*known: Device.WgmmaKernelsMatchTheirHostEmulation" \
  "$tmp/err" || fail "an unknown test: exit $rc: $(cat "$tmp/err")"
echo "device_test_kernels_cache: passed (6 kernels)"
