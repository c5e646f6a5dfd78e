#!/usr/bin/env bash
# The device bundle's dry run (ctest device_bundle_dry_run), on a machine without a GPU:
#   1. scripts/device-bundle.sh packs this build (under its 30 MiB limit);
#   2. DIR/run.sh resolves every library the bundle needs with only the bundle's libraries and
#      the GPU libraries it finds (ldd: nothing missing, nothing from elsewhere) and exits 3
#      with one "no GPU here" line;
#   3. a bundle that lacks one of its libraries, or a needed GPU library this machine lacks,
#      exits 4 naming it;
#   4. the bundle's NVRTC cache is unpacked with or without the xz program, and a corrupt one
#      is said, not fatal.
# Skips (exit 77) on a machine with a GPU: there run.sh would run the real thing.
#
#   tests/device/bundle_dry_run.sh BUILD_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "device_bundle_dry_run: SKIPPED, this machine has a GPU"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "device_bundle_dry_run: FAILED: $*"; exit 1; }

"$root/scripts/device-bundle.sh" --no-precompile --from-build "$build" "$tmp/bundle" ||
  fail "device-bundle.sh exited $?"
for f in run.sh MANIFEST.txt gpu-libs.txt system-libs.txt bin/brickdl-tune bin/brickdl-device \
  bin/cuda_device_tests results/gpu_summary.py experiments/gpu_check_resnet50.yaml; do
  [ -e "$tmp/bundle/$f" ] || fail "the bundle lacks $f"
done
size=$(du -sb "$tmp/bundle" | cut -f1)
[ "$size" -le $((30 * 1024 * 1024)) ] || fail "the bundle is $size bytes"

# brickdl-device without a GPU: exit 4 and why; an unknown spec: exit 2 naming the known ones.
LD_LIBRARY_PATH=$tmp/bundle/lib "$tmp/bundle/bin/brickdl-device" --json 2>"$tmp/err"
rc=$?
[ $rc -eq 4 ] && grep -q '^brickdl-device: no GPU: ' "$tmp/err" || fail "brickdl-device without a GPU: exit $rc"
LD_LIBRARY_PATH=$tmp/bundle/lib "$tmp/bundle/bin/brickdl-device" --spec H300 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "unknown GPU spec 'H300' (known: A100-40GB, A100-80GB, H100-SXM, H200)" \
  "$tmp/err" || fail "brickdl-device --spec H300: exit $rc: $(cat "$tmp/err")"

# 2. The dry run: every library resolved, then "no GPU".
(cd "$tmp" && "$tmp/bundle/run.sh" "$tmp/out" >"$tmp/log" 2>&1)
rc=$?
cat "$tmp/log"
[ $rc -eq 3 ] || fail "run.sh exited $rc, not 3 (no GPU)"
[ "$(grep -c '^run.sh: no GPU here' "$tmp/log")" -eq 1 ] || fail "no single 'no GPU here' line"
grep -q '^ldd: every library resolved' "$tmp/out/env.txt" || fail "ldd found problems"
grep -q '^MISSING' "$tmp/out/env.txt" && fail "a needed GPU library is missing here"
[ "$(ls "$tmp/out" | wc -l)" -le 8 ] || fail "more than 8 files in OUT"
grep -q 'NVRTC cache: none in the bundle' "$tmp/log" || fail "the missing NVRTC cache is not said"

# 3a. A bundled library removed: found elsewhere here, which a bare machine would not do.
cp -r "$tmp/bundle" "$tmp/b2"
rm "$tmp/b2/lib/libyaml-cpp.so.0.7"
(cd "$tmp" && "$tmp/b2/run.sh" "$tmp/out2" >"$tmp/log2" 2>&1)
rc=$?
[ $rc -eq 4 ] || { cat "$tmp/log2"; fail "without libyaml-cpp run.sh exited $rc, not 4"; }
grep -q 'libyaml-cpp.so.0.7 resolved outside the bundle' "$tmp/out2/env.txt" ||
  fail "env.txt does not name libyaml-cpp.so.0.7"

# 3b. A needed GPU library this machine lacks.
cp -r "$tmp/bundle" "$tmp/b3"
echo "libbrickdl-not-there.so.1 needed" >>"$tmp/b3/gpu-libs.txt"
(cd "$tmp" && "$tmp/b3/run.sh" "$tmp/out3" >"$tmp/log3" 2>&1)
rc=$?
[ $rc -eq 4 ] || { cat "$tmp/log3"; fail "with a missing GPU library run.sh exited $rc, not 4"; }
grep -q 'MISSING libbrickdl-not-there.so.1' "$tmp/log3" || fail "the missing library is not named"
# 4. The NVRTC cache (device-bundle.sh packs it with xz): unpacked by tar, by Python's tarfile
#    where the xz program fails, and a corrupt one said and survived (still exit 3).
mkdir -p "$tmp/c/nvrtc-cache" "$tmp/noxz"
echo one >"$tmp/c/nvrtc-cache/a_sm90.cubin"
echo two >"$tmp/c/nvrtc-cache/b_sm90.cubin"
cp -r "$tmp/bundle" "$tmp/b4"
tar -C "$tmp/c" -cJf "$tmp/b4/nvrtc-cache.tar.xz" nvrtc-cache
printf '#!/bin/sh\necho "xz: not on this machine" >&2\nexit 127\n' >"$tmp/noxz/xz"
chmod +x "$tmp/noxz/xz"
for path in "$PATH" "$tmp/noxz:$PATH"; do
  (cd "$tmp" && PATH=$path "$tmp/b4/run.sh" "$tmp/out4" >"$tmp/log4" 2>&1)
  rc=$?
  [ $rc -eq 3 ] && grep -q 'NVRTC cache: 2 kernels compiled ahead' "$tmp/log4" ||
    { cat "$tmp/log4"; fail "NVRTC cache (PATH $path): exit $rc, or not unpacked"; }
done
head -c 4096 /dev/urandom >"$tmp/b4/nvrtc-cache.tar.xz"
(cd "$tmp" && "$tmp/b4/run.sh" "$tmp/out5" >"$tmp/log5" 2>&1)
rc=$?
[ $rc -eq 3 ] && grep -q 'nvrtc-cache.tar.xz could not be unpacked' "$tmp/log5" ||
  { cat "$tmp/log5"; fail "a corrupt NVRTC cache: exit $rc, or not said"; }
echo "device_bundle_dry_run: passed (bundle $((size / 1024)) KiB)"
