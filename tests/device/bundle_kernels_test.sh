#!/usr/bin/env bash
# ctest bundle_kernels_compile_clean: every kernel the device bundle carries compiled
# (scripts/device/precompile.sh: the tuned experiments' candidates, the device tests' cases and
# brickdl-calibrate's convs, for the H200's sm_90a) compiles into a fresh NVRTC cache, and ptxas
# flags none: no performance advisory (C75xx: wgmma serialized, ...), no stack frame of 128
# bytes or more. The cache is fresh because a cached cubin keeps no log: only its compile shows
# them.
#
#   tests/device/bundle_kernels_test.sh BUILD_DIR
set -uo pipefail
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "bundle_kernels_compile_clean: FAILED: $*"; exit 1; }
"$root/scripts/device/precompile.sh" "$build" "$tmp/cache" >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
[ $rc -eq 0 ] || fail "scripts/device/precompile.sh exited $rc"
grep -q ': ptxas advisory: \|: ptxas: a [0-9]*-byte stack frame' "$tmp/log" &&
  fail "ptxas flagged a kernel (above)"
# One summary line per experiment (4) and per device test (4), each with nothing failed and
# nothing flagged, and the calibration's line.
lines=$(grep -c ' compiled in .*, 0 failed to compile, 0 flagged by ptxas$' "$tmp/log")
[ "$lines" -eq 8 ] || fail "$lines clean summary lines, not 8"
grep -q '^brickdl-calibrate: [0-9]* conv kernels .*, 0 flagged by ptxas$' "$tmp/log" ||
  fail "no clean brickdl-calibrate line"
compiled=$(sed -n 's/.*: \([0-9]*\) compiled in .*/\1/p' "$tmp/log" | awk '{s += $1} END {print s}')
cubins=$(find "$tmp/cache" -name '*.cubin' | wc -l)
if [ "$cubins" -lt "$compiled" ] || [ "$compiled" -le 100 ]; then
  fail "$compiled kernels compiled, $cubins cubins in the cache"
fi
echo "bundle_kernels_compile_clean: passed ($cubins kernels, none flagged by ptxas)"
