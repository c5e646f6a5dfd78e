#!/usr/bin/env bash
# brickdl-precompile (ctest precompile_cache): compiling an experiment's kernels ahead fills
# the NVRTC disk cache, and a second run finds every one of them there (the key a GPU
# machine's tuner computes for the same candidate: source, architecture, options, NVRTC).
#
#   tests/device/precompile_test.sh BRICKDL_PRECOMPILE EXPERIMENT
set -uo pipefail
tool=$1
exp=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "precompile_cache: FAILED: $*"; exit 1; }
first=$("$tool" --arch 90 --cache "$tmp/cache" "$exp") || fail "first run exited $?"
echo "$first"
n=$(echo "$first" | sed -n 's/.*: \([0-9]*\) compiled in .*/\1/p')
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "nothing compiled"
[ "$(ls "$tmp/cache" | wc -l)" -eq "$n" ] || fail "the cache holds $(ls "$tmp/cache" | wc -l) files, not $n"
second=$("$tool" --arch 90 --cache "$tmp/cache" "$exp") || fail "second run exited $?"
echo "$second"
echo "$second" | grep -q ": 0 compiled in .* $n already cached" || fail "the second run compiled again"
"$tool" --arch 90 --cache "$tmp/cache" "$tmp/nope.yaml" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q 'nope.yaml' "$tmp/err" || fail "a missing experiment: exit $rc"
echo "precompile_cache: passed ($n kernels)"
