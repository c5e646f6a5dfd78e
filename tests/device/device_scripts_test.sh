#!/usr/bin/env bash
# The device scripts that run here, around a lent GPU's run (ctest device_scripts; no GPU, no
# CUDA needed), on a scratch git checkout that holds copies of them:
#   1. scripts/lib/travel.sh counts what the device tool carries as the tool does: tracked
#      files (a deleted one counts nothing), untracked files git does not ignore, shared/ once;
#      not ignored files, not the .git folder, not the bundle's folder when it is named; a
#      folder that is not a git checkout is an error;
#   2. scripts/device-bundle.sh refuses, before building anything, a tree that leaves no room;
#   3. scripts/device/file-results.sh files a run's output (the database only under 8 MiB),
#      adds the run's line to results/gpu/README.md, and says whether a rerun with the bundle
#      still fits, naming the largest filed file when it does not; an OUT that is not a run's
#      is refused (exit 2).
#
#   tests/device/device_scripts_test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "device_scripts: FAILED: $*"; exit 1; }
# bytes FILE N: a file of N bytes.
bytes() { mkdir -p "$(dirname "$1")"; head -c "$2" /dev/zero >"$1"; }
expect() { [ "$2" = "$3" ] || fail "$1: $2, expected $3"; }

# ---- 1. travel.sh ----------------------------------------------------------------------------
# shellcheck source=scripts/lib/travel.sh
. "$root/scripts/lib/travel.sh"
r=$tmp/repo
mkdir -p "$r"
git -C "$r" init -q
printf 'ignored.bin\n/bundle-ignored/\n' >"$r/.gitignore"
bytes "$r/tracked.bin" 1000
bytes "$r/dir with space/tracked 2.bin" 2000
bytes "$r/gone.bin" 4000
git -C "$r" add -A
git -C "$r" -c user.name=t -c user.email=t@t commit -qm scratch
rm "$r/gone.bin"                                   # deleted: nothing travels
bytes "$r/untracked.bin" 500                       # travels
bytes "$r/ignored.bin" 100000                      # ignored: stays
bytes "$r/shared/data.bin" 300                     # shared/: travels, once
bytes "$r/bundle/programs.tar.xz" 700              # a bundle folder git does not ignore
bytes "$r/bundle-ignored/programs.tar.xz" 900      # an ignored one: only carry sends it
base=$(($(stat -c %s "$r/.gitignore") + 1000 + 2000 + 500 + 300))
expect "the tree with the bundle's folder" "$(travel_tree_bytes "$r")" $((base + 700))
expect "the tree without the bundle's folder" "$(travel_tree_bytes "$r" "$r/bundle")" "$base"
expect "the tree (ignored bundle named)" "$(travel_tree_bytes "$r" "$r/bundle-ignored")" \
  $((base + 700))
expect "the tree (a bundle outside)" "$(travel_tree_bytes "$r" "$tmp")" $((base + 700))
expect "the tree from a subfolder" "$(cd "$r/shared" && travel_tree_bytes .. ../bundle)" "$base"
git -C "$r" add shared/data.bin
expect "the tree (shared/ tracked)" "$(travel_tree_bytes "$r" "$r/bundle")" "$base"
expect "the largest tracked file" "$(travel_largest "$r" 1)" "2000 dir with space/tracked 2.bin"
expect "the limit" "$(travel_limit_bytes)" $((64 * 1024 * 1024))
expect "the limit (set)" "$(BRICKDL_DEVICE_TRAVEL_LIMIT=5 travel_limit_bytes)" 5
expect "KiB rounded up" "$(travel_kib 1025)" 2
mkdir "$tmp/plain"
travel_tree_bytes "$tmp/plain" 2>"$tmp/err" && fail "a folder that is not a checkout was counted"
grep -q "is not a git checkout" "$tmp/err" || fail "not a checkout: $(cat "$tmp/err")"
echo "device_scripts: travel.sh counts as the device tool does"

# ---- 2. device-bundle.sh: no room, said before building ----------------------------------------
# (a cmake that only says it ran: a script that went on to build fails here at once)
mkdir -p "$tmp/stub"
printf '#!/bin/sh\necho "cmake ran" >&2\nexit 1\n' >"$tmp/stub/cmake"
chmod +x "$tmp/stub/cmake"
PATH=$tmp/stub:$PATH BRICKDL_DEVICE_TRAVEL_LIMIT=1024 BRICKDL_BUNDLE_BUILD_DIR=$tmp/never-built \
  "$root/scripts/device-bundle.sh" "$tmp/bundle-nr" >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "device-bundle.sh with no room: exit $rc: $(cat "$tmp/log")"
grep -q "the checkout's working tree alone travels [0-9]* KiB, over the 1 KiB" "$tmp/log" ||
  fail "device-bundle.sh with no room: $(cat "$tmp/log")"
grep -q "^  [0-9]* " "$tmp/log" || fail "device-bundle.sh with no room names no file"
grep -q "cmake ran" "$tmp/log" || [ -e "$tmp/bundle-nr" ] && fail "device-bundle.sh built or packed"
echo "device_scripts: device-bundle.sh refuses a tree with no room before building"

# ---- 3. file-results.sh ----------------------------------------------------------------------
c=$tmp/checkout # a checkout holding the scripts and results/gpu/README.md
mkdir -p "$c/scripts/device" "$c/scripts/lib" "$c/results/gpu"
cp "$root/scripts/device/file-results.sh" "$c/scripts/device/"
cp "$root/scripts/lib/travel.sh" "$c/scripts/lib/"
printf '| run | GPU | revision | stages | verdicts |\n| --- | --- | --- | --- | --- |\n' \
  >"$c/results/gpu/README.md"
printf '/device-bundle/\n' >"$c/.gitignore"
git -C "$c" init -q && git -C "$c" add -A
bytes "$c/device-bundle/programs.tar.xz" 20000
o=$tmp/out # a run's OUT as fetched back, in run.sh's formats
mkdir -p "$o"
{
  echo "== bundle"
  echo "brickdl device bundle, revision 0123456789ab, built 2026-12-03T00:00:00Z"
  echo '{"name": "NVIDIA H200", "sm": "9.0"}'
} >"$o/env.txt"
{
  echo "brickdl device run"
  echo "stages: env ok 3, wgmma ok 20, tune_fp32 timeout 120"
  echo "gpu_check_resnet50: layer1.0: best padded 0.100 ms = 0.90x cuDNN fp32, 1.10x cuDNN tf32"
  echo "gpu_check_resnet50: layer2.0: no verdict (no validated merged kernel or no cuDNN time)"
} >"$o/summary.txt"
echo "kernel,time_ms" >"$o/summary.csv"
echo "console" >"$o/console.log"
bytes "$o/brickdl.db" 3000
# The date is read once, before filing, and passed on: read after, it is the next day's when
# the filing crosses UTC midnight.
day=$(date -u +%Y-%m-%d)
BRICKDL_FILE_DATE=$day "$c/scripts/device/file-results.sh" "$o" >"$tmp/log" 2>&1 ||
  fail "file-results: $(cat "$tmp/log")"
d=$c/results/gpu/$day-h200
for f in env.txt summary.txt summary.csv console.log brickdl.db; do
  cmp -s "$o/$f" "$d/$f" || fail "file-results did not file $f: $(ls "$d")"
done
line=$(tail -1 "$c/results/gpu/README.md")
case "$line" in
  "| [$(basename "$d")]($(basename "$d")/summary.txt) | NVIDIA H200 | 0123456789ab | env ok 3, wgmma ok 20, tune_fp32 timeout 120 | gpu_check_resnet50: layer1.0: best padded"*"no verdict"*) ;;
  *) fail "results/gpu/README.md's line: $line" ;;
esac
# The checkout now: README 2 lines, .gitignore, the two scripts, the filed files; + the bundle.
tree=$(travel_tree_bytes "$c" "$c/device-bundle")
grep -q "^file-results: a rerun fits: it carries the checkout $(travel_kib "$tree") KiB + device-bundle 20 KiB = $(travel_kib $((tree + 20000))) KiB of 65536 KiB$" \
  "$tmp/log" || fail "file-results, a rerun that fits: $(cat "$tmp/log")"
# A limit the filed files break: the largest of them is named; an unpacked bundle is said.
mkdir "$c/device-bundle/bin"
BRICKDL_DEVICE_TRAVEL_LIMIT=$((tree + 20000 + 100)) "$c/scripts/device/file-results.sh" "$o" rerun \
  >"$tmp/log" 2>&1 || fail "file-results (second): $(cat "$tmp/log")"
grep -q "a rerun would be REFUSED" "$tmp/log" &&
  grep -q "^  3000 results/gpu/rerun/brickdl.db$" "$tmp/log" &&
  grep -q "device-bundle holds bin/: unpacked by a rehearsal" "$tmp/log" ||
  fail "file-results, a rerun that does not fit: $(cat "$tmp/log")"
# A database over 8 MiB stays out (summary.csv keeps its rows); an OUT of no run is refused.
bytes "$o/brickdl.db" $((8 * 1024 * 1024 + 1))
"$c/scripts/device/file-results.sh" "$o" big >"$tmp/log" 2>&1 || fail "file-results (big)"
[ ! -e "$c/results/gpu/big/brickdl.db" ] && grep -q "brickdl.db is over 8 MiB: not copied" \
  "$tmp/log" || fail "file-results copied a database over 8 MiB: $(cat "$tmp/log")"
"$c/scripts/device/file-results.sh" "$tmp/plain" >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "holds no summary.txt or console.log of a device run" "$tmp/log" ||
  fail "file-results on an OUT of no run: exit $rc: $(cat "$tmp/log")"
echo "device_scripts: file-results.sh files a run and says whether a rerun fits"
echo "device_scripts: passed"
