#!/usr/bin/env bash
# The device bundle's dry run (ctest device_bundle_dry_run), on a machine without a GPU:
#   1. scripts/device-bundle.sh packs this build (its programs and libraries in
#      programs.tar.xz), which run.sh unpacks first, with or without the xz program; the
#      checkout's tree and the bundle fit in what the device tool carries (64 MiB), and a
#      bundle that would not fit beside the tree is refused after packing, naming the largest
#      files (tests/device/device_scripts_test.sh tests the counting);
#   2. DIR/run.sh resolves every library the bundle needs with only the bundle's libraries and
#      the GPU libraries it finds (ldd: nothing missing, nothing from elsewhere) and exits 3
#      with one "no GPU here" line;
#   3. a bundle that lacks one of its libraries, or a needed GPU library this machine lacks,
#      exits 4 naming it;
#   4. the bundle's NVRTC cache is unpacked with or without the xz program, and a corrupt one
#      is said, not fatal; the env stage says whether the cache's NVRTC is this machine's, and
#      when the driver is older than the CUDA release whose NVRTC compiled it;
#   5. run.sh --plan: the stages' order (env, the wgmma and tensor-core tests each in a process
#      of its own, the sticky-error tests, calibrate, the tunes, then the rest), the wgmma test
#      ending within the run's first 3 minutes, the first stages' caps within the budget and the
#      budget within the device tool's 480 s;
#   6. run.sh's functions, sourced, against stub programs: the tunes run with timeout_s 5, a
#      tuner that dies is relaunched once and resumes from the same database (no --fresh), one
#      that dies twice is not relaunched again, one that exits 2 (bad input) is not relaunched;
#      the calibration lands in OUT, and its stage is skipped, said, without brickdl-calibrate.
# Skips (exit 77) on a machine with a GPU: there run.sh would run the real thing. Prints the
# seconds each step took (see tests/device/CMakeLists.txt's TIMEOUT for what they add up to).
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
t_start=$EPOCHREALTIME
step() {
  echo "device_bundle_dry_run: [$(awk -v a="$t_start" -v b="$EPOCHREALTIME" \
    'BEGIN {printf "%.1f", b - a}')s] $*"
}
# A variant of the bundle: hard links, not a copy of its 28 MB; a file a variant changes is
# replaced, never written through the link.
variant() { cp -al "$tmp/bundle" "$1"; }

step "packing the bundle"
"$root/scripts/device-bundle.sh" --no-precompile --from-build "$build" "$tmp/bundle" \
  >"$tmp/pack.log" 2>&1 || { cat "$tmp/pack.log"; fail "device-bundle.sh exited $?"; }
cat "$tmp/pack.log"
step "packed"
for f in run.sh MANIFEST.txt gpu-libs.txt system-libs.txt programs.tar.xz \
  results/gpu_summary.py experiments/gpu_check_resnet50.yaml; do
  [ -e "$tmp/bundle/$f" ] || fail "the bundle lacks $f"
done
[ -e "$tmp/bundle/bin" ] && fail "the bundle's bin/ travels unpacked"
size=$(find "$tmp/bundle" -type f -printf '%s\n' | awk '{s += $1} END {printf "%d", s}')
# "travels: the checkout's tree T KiB + the bundle B KiB = S KiB of 65536 KiB; F KiB to spare"
travels=$(grep "^device-bundle: travels: " "$tmp/pack.log") || fail "no 'travels:' line"
pattern='.* tree ([0-9]+) KiB \+ the bundle ([0-9]+) KiB = ([0-9]+) KiB of ([0-9]+) KiB;.*'
read -r tree_kib bundle_kib sum_kib limit_kib < <(echo "$travels" | sed -E "s/$pattern/\1 \2 \3 \4/")
[ "$limit_kib" = 65536 ] && [ "$bundle_kib" -eq $(((size + 1023) / 1024)) ] &&
  [ "$sum_kib" -le "$limit_kib" ] && [ "$tree_kib" -gt 0 ] ||
  fail "the bundle is $size bytes: $travels"
# A limit the bundle breaks beside the tree (not the tree alone): refused after packing.
BRICKDL_DEVICE_TRAVEL_LIMIT=$((tree_kib * 1024 + 4096)) "$root/scripts/device-bundle.sh" \
  --no-precompile --from-build "$build" "$tmp/too-large" >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "and the bundle ([0-9]* KiB) travel [0-9]* KiB, over the" "$tmp/log" &&
  grep -q "^  [0-9]* results/" "$tmp/log" ||
  { cat "$tmp/log"; fail "a bundle with no room: exit $rc"; }
rm -rf "$tmp/too-large"
step "a bundle with no room refused"
# run.sh unpacks the programs first (no GPU: exit 3), by Python's tarfile where xz fails.
mkdir -p "$tmp/noxz"
printf '#!/bin/sh\necho "xz: not on this machine" >&2\nexit 127\n' >"$tmp/noxz/xz"
chmod +x "$tmp/noxz/xz"
variant "$tmp/packed"
(cd "$tmp" && PATH="$tmp/noxz:$PATH" "$tmp/packed/run.sh" "$tmp/out0" >"$tmp/log0" 2>&1)
rc=$?
[ $rc -eq 3 ] && [ -x "$tmp/packed/bin/brickdl-tune" ] ||
  { cat "$tmp/log0"; fail "run.sh without xz: exit $rc, or the programs not unpacked"; }
(cd "$tmp" && "$tmp/bundle/run.sh" "$tmp/out0b" >"$tmp/log0" 2>&1)
for f in bin/brickdl-tune bin/brickdl-device bin/cuda_device_tests bin/process_pool_tests \
  bin/fault_measure_worker; do
  [ -x "$tmp/bundle/$f" ] || { cat "$tmp/log0"; fail "run.sh did not unpack $f"; }
done
step "unpacked"

# brickdl-device without a GPU: exit 4 and why; an unknown spec: exit 2 naming the known ones.
# Without a GPU it still says NVRTC's version (run.sh's NVRTC cache verdict needs it).
LD_LIBRARY_PATH=$tmp/bundle/lib "$tmp/bundle/bin/brickdl-device" --json >"$tmp/dev.json" 2>"$tmp/err"
rc=$?
[ $rc -eq 4 ] && grep -q '^brickdl-device: no GPU: ' "$tmp/err" || fail "brickdl-device without a GPU: exit $rc"
nvrtc=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["nvrtc_version"])' \
  "$tmp/dev.json") || fail "brickdl-device --json without a GPU: $(cat "$tmp/dev.json")"
echo "$nvrtc" | grep -Eq '^[0-9]+\.[0-9]+$' || fail "brickdl-device: NVRTC version '$nvrtc'"
LD_LIBRARY_PATH=$tmp/bundle/lib "$tmp/bundle/bin/brickdl-device" --spec H300 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "unknown GPU spec 'H300' (known: A100-40GB, A100-80GB, H100-SXM, H200)" \
  "$tmp/err" || fail "brickdl-device --spec H300: exit $rc: $(cat "$tmp/err")"

# 2. The dry run: every library resolved, then "no GPU".
step "run.sh without a GPU"
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
step "a bundled library removed, a GPU library missing"
variant "$tmp/b2"
rm "$tmp/b2/lib/libyaml-cpp.so.0.7"
(cd "$tmp" && "$tmp/b2/run.sh" "$tmp/out2" >"$tmp/log2" 2>&1)
rc=$?
[ $rc -eq 4 ] || { cat "$tmp/log2"; fail "without libyaml-cpp run.sh exited $rc, not 4"; }
grep -q 'libyaml-cpp.so.0.7 resolved outside the bundle' "$tmp/out2/env.txt" ||
  fail "env.txt does not name libyaml-cpp.so.0.7"

# 3b. A needed GPU library this machine lacks.
variant "$tmp/b3"
rm "$tmp/b3/gpu-libs.txt"
{ cat "$tmp/bundle/gpu-libs.txt"; echo "libbrickdl-not-there.so.1 needed"; } >"$tmp/b3/gpu-libs.txt"
(cd "$tmp" && "$tmp/b3/run.sh" "$tmp/out3" >"$tmp/log3" 2>&1)
rc=$?
[ $rc -eq 4 ] || { cat "$tmp/log3"; fail "with a missing GPU library run.sh exited $rc, not 4"; }
grep -q 'MISSING libbrickdl-not-there.so.1' "$tmp/log3" || fail "the missing library is not named"
# 4. The NVRTC cache (device-bundle.sh packs it with xz): unpacked by tar, by Python's tarfile
#    where the xz program fails, and a corrupt one said and survived (still exit 3).
#    MANIFEST.txt names the NVRTC that compiled it: this machine's (used), then another one
#    (differs: every kernel compiled here).
step "the NVRTC cache"
mkdir -p "$tmp/c/nvrtc-cache"
echo one >"$tmp/c/nvrtc-cache/a_sm90.cubin"
echo two >"$tmp/c/nvrtc-cache/b_sm90.cubin"
variant "$tmp/b4"
tar -C "$tmp/c" -cJf "$tmp/b4/nvrtc-cache.tar.xz" nvrtc-cache
for path in "$PATH" "$tmp/noxz:$PATH"; do
  made_by=$nvrtc
  verdict="is $nvrtc: used"
  if [ "$path" != "$PATH" ]; then
    made_by=99.9
    verdict="is $nvrtc: differs: every kernel will be compiled here (~1.4 s each)"
  fi
  rm "$tmp/b4/MANIFEST.txt"
  { cat "$tmp/bundle/MANIFEST.txt"; echo "nvrtc-cache: NVRTC $made_by sm_90a 2 kernels 1.4 s each"; } \
    >"$tmp/b4/MANIFEST.txt"
  (cd "$tmp" && PATH=$path "$tmp/b4/run.sh" "$tmp/out4" >"$tmp/log4" 2>&1)
  rc=$?
  [ $rc -eq 3 ] && grep -q 'NVRTC cache: 2 kernels compiled ahead' "$tmp/log4" ||
    { cat "$tmp/log4"; fail "NVRTC cache (PATH $path): exit $rc, or not unpacked"; }
  grep -q "NVRTC cache: compiled by NVRTC $made_by for sm_90a; this machine's NVRTC $verdict\$" \
    "$tmp/log4" || { cat "$tmp/log4"; fail "no NVRTC cache verdict '... $verdict'"; }
done
rm "$tmp/b4/nvrtc-cache.tar.xz"
head -c 4096 /dev/urandom >"$tmp/b4/nvrtc-cache.tar.xz"
(cd "$tmp" && "$tmp/b4/run.sh" "$tmp/out5" >"$tmp/log5" 2>&1)
rc=$?
[ $rc -eq 3 ] && grep -q 'nvrtc-cache.tar.xz could not be unpacked' "$tmp/log5" ||
  { cat "$tmp/log5"; fail "a corrupt NVRTC cache: exit $rc, or not said"; }

# A driver older than the CUDA release whose NVRTC compiled the cache is said; one as new or
# newer is not (run.sh's functions, sourced, against a device.json).
driver_case() {
  (
    # shellcheck source=scripts/device/run.sh
    . "$tmp/b4/run.sh"
    setup_run "$tmp/out6"
    printf '{"gpu": true, "cc": 90, "nvrtc_version": "13.0", "driver_version": %s}\n' "$1" \
      >"$work/device.json"
    driver_verdict 13.0
    rm -rf "$work"
  )
}
driver_case 12080 | grep -q 'this driver supports CUDA 12.8, older than the CUDA 13.0 whose NVRTC' ||
  fail "an old driver is not said: $(driver_case 12080)"
[ -z "$(driver_case 13000)" ] && [ -z "$(driver_case 13020)" ] ||
  fail "a driver new enough is said: $(driver_case 13000)"

# 5. The plan: the stages in order, each with its cap; the first ones within the budget.
step "run.sh --plan"
"$tmp/bundle/run.sh" --plan >"$tmp/plan" || fail "run.sh --plan exited $?"
cat "$tmp/plan"
order=$(awk '$1 == "plan:" && $3 ~ /^[0-9]+s$/ {printf "%s/%s ", $2, $4}' "$tmp/plan")
expected="env/first dev_wgmma/first dev_tensor_core/first dev_sticky/first dev_worker/first \
dev_statuses/first \
calibrate/first tune_fp32/first tune_tf32/first dev_cluster/rest dev_generated/rest dev_rest/rest \
micro/rest toolkit_tests/rest tune_bf16/rest fw_"
case "$order" in "$expected"*) ;; *) fail "the stages' order: $order" ;; esac
# The wgmma test's verdict within the run's first 3 minutes: the caps of the stages up to its
# own, plus 60 s for unpacking the programs and the NVRTC cache (about 6 s here).
upto=$(awk '$1 == "plan:" && $3 ~ /^[0-9]+s$/ {s += $3 + 0; if ($2 == "dev_wgmma") {print s; exit}}' \
  "$tmp/plan")
if [ -z "$upto" ] || [ $((upto + 60)) -gt 180 ]; then
  fail "the wgmma test ends ${upto:-never}s + 60s into the run, past its first 3 minutes"
fi
# Each device test of the first stages is one gtest name: a process of its own.
for t in dev_wgmma:WgmmaKernelsMatchTheirHostEmulation \
  dev_tensor_core:TensorCoreKernelsMatchTheirHostEmulation \
  dev_sticky:MeasurerResetsTheDeviceOnlyAfterStickyErrors \
  dev_statuses:MeasurerStatusesForFailingCandidates; do
  grep -Eq "^plan: ${t%%:*} .*cuda_device_tests --gtest_filter=Device\.${t#*:}\$" "$tmp/plan" ||
    fail "${t%%:*} does not run Device.${t#*:} alone"
done
sum=$(awk '$1 == "plan:" && $4 == "first" {s += $3} END {print s}' "$tmp/plan")
read -r said reserve budget < <(sed -n 's/^plan: first stages \([0-9]*\)s + reserve \([0-9]*\)s = [0-9]*s; budget \([0-9]*\)s.*/\1 \2 \3/p' "$tmp/plan")
[ -n "${said:-}" ] && [ "$sum" -eq "$said" ] || fail "the plan's sum '${said:-}' is not its caps' $sum"
[ $((sum + reserve)) -le "$budget" ] && [ "$budget" -le 480 ] ||
  fail "caps ${sum}s + reserve ${reserve}s, budget ${budget}s: over the budget or the tool's 480 s"

# 6. The stage functions, sourced, against stubs: a tuner that dies, the calibration.
step "tune and calibrate against stubs"
s=$tmp/stub
mkdir -p "$s/bin" "$s/experiments" "$s/outS"
cp "$tmp/bundle/run.sh" "$s/run.sh"
cp "$root/experiments/gpu_check_resnet50.yaml" "$s/experiments/"
cat >"$s/bin/brickdl-tune" <<'EOF'
#!/bin/sh
# A tuner that dies (SIGSEGV) in its first STUB_DIES runs, or exits STUB_EXIT; records its
# arguments and the experiment's timeout_s.
n=$(($(cat "$STUB_DIR/count" 2>/dev/null || echo 0) + 1))
echo $n >"$STUB_DIR/count"
echo "$*" >>"$STUB_DIR/args"
grep -h '^  timeout_s:' "$1" >>"$STUB_DIR/timeouts"
[ -n "${STUB_EXIT:-}" ] && exit "$STUB_EXIT"
[ "$n" -le "${STUB_DIES:-0}" ] && kill -SEGV $$
exit 0
EOF
chmod +x "$s/bin/brickdl-tune"
# tune_case NAME DIES EXIT: runs the tune stage once; its stages file in $s/NAME.stages.
tune_case() {
  rm -f "$s/count" "$s/args" "$s/timeouts"
  (
    export STUB_DIR=$s STUB_DIES=$2 STUB_EXIT=$3
    # shellcheck source=scripts/device/run.sh
    . "$s/run.sh"
    setup_run "$s/outS"
    tune_calibration=1
    echo '{}' >"$work/calibration.json"
    tune tune_fp32 gpu_check_resnet50.yaml 5 >"$s/$1.log" 2>&1
    cp "$stages" "$s/$1.stages"
    rm -rf "$work"
  )
}
tune_case dies_once 1 ""
[ "$(cat "$s/count")" = 2 ] || fail "a tuner that died once ran $(cat "$s/count") times, not 2"
grep -q '^tune_fp32 died(signal 11) relaunched [0-9]*s$' "$s/dies_once.stages" &&
  grep -q '^tune_fp32-relaunch ok [0-9]*s$' "$s/dies_once.stages" ||
  fail "the stages file: $(cat "$s/dies_once.stages")"
grep -q 'relaunched once, resuming from the database' "$s/dies_once.log" ||
  fail "the log does not say so: $(cat "$s/dies_once.log")"
[ "$(sort -u "$s/args" | wc -l)" = 1 ] && grep -q -- '--db [^ ]*/brickdl.db' "$s/args" &&
  ! grep -q -- '--fresh' "$s/args" || fail "the relaunch did not resume the database: $(cat "$s/args")"
grep -q -- '--calibration [^ ]*/calibration.json' "$s/args" || fail "no --calibration: $(cat "$s/args")"
[ "$(sort -u "$s/timeouts")" = "  timeout_s: 5" ] || fail "the tunes' timeout_s: $(cat "$s/timeouts")"
tune_case dies_twice 5 ""
[ "$(cat "$s/count")" = 2 ] || fail "a tuner that always dies ran $(cat "$s/count") times, not 2"
grep -q '^tune_fp32-relaunch died(signal 11) [0-9]*s$' "$s/dies_twice.stages" ||
  fail "the stages file: $(cat "$s/dies_twice.stages")"
tune_case bad_input 0 2
[ "$(cat "$s/count")" = 1 ] || fail "a tuner that exited 2 (bad input) was relaunched"
# The calibration: written (exit 1: some measurement failed) and copied to OUT; skipped, said,
# without brickdl-calibrate.
calibrate_case() {
  (
    # shellcheck source=scripts/device/run.sh
    . "$s/run.sh"
    setup_run "$s/outS"
    calibrate >"$s/$1.log" 2>&1
    cp "$stages" "$s/$1.stages"
    rm -rf "$work"
  )
}
calibrate_case nocal
grep -q '^calibrate skipped(not-in-bundle)$' "$s/nocal.stages" &&
  grep -q 'calibrate: skipped, the bundle has no bin/brickdl-calibrate' "$s/nocal.log" ||
  fail "calibrate without the program: $(cat "$s/nocal.stages")"
printf '#!/bin/sh\n[ "$1 $2 $3" = "--spec H200 --out" ] || exit 2\necho "{}" >"$4"\nexit 1\n' \
  >"$s/bin/brickdl-calibrate"
chmod +x "$s/bin/brickdl-calibrate"
calibrate_case cal
grep -q '^calibrate failed(exit 1) ' "$s/cal.stages" && [ -f "$s/outS/calibration.json" ] ||
  fail "calibrate: $(cat "$s/cal.stages"); OUT: $(ls "$s/outS")"
step "done"
echo "device_bundle_dry_run: passed (bundle $((size / 1024)) KiB)"
