#!/usr/bin/env bash
# The quick start's scripts stay quiet and never hide a failure (ctest quiet_scripts):
#   1. scripts/install-deps.sh, with stand-ins for dpkg-query and apt-get on PATH and for the
#      virtual environment's python (BRICKDL_VENV): one line per step when everything is
#      present; --dry-run names what it would install and runs no apt-get or pip; an install
#      prints two lines per step and keeps apt's and pip's output in its log; a failed one exits
#      1 with the tool's last lines and the log's path;
#   2. scripts/lib/quiet.sh on a small CMake project: the configure line, a few progress lines
#      and the closing line instead of make's output, every compiler warning printed, a compile
#      error printed with the log's path and a non-zero status, a build with nothing to do in
#      one line, a failed configure with CMake's error and the log's path.
#
#   tests/cli/quiet_scripts_test.sh          (QUIET_SHOW=1 also prints what the probe build printed)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "quiet_scripts: FAILED: $*"
  exit 1
}
# expect_lines FILE N: FILE has exactly N lines.
expect_lines() {
  local n
  n=$(wc -l <"$1")
  [[ $n -eq $2 ]] || fail "$(basename "$1"): $n lines, expected $2:"$'\n'"$(cat "$1")"
}

# ---- 1. install-deps.sh -------------------------------------------------------------------
fake=$tmp/bin
mkdir -p "$fake"
# dpkg-query -W -f=FORMAT PKG...: every package installed except those in $FAKE_MISSING.
cat >"$fake/dpkg-query" <<'SH'
#!/usr/bin/env bash
shift 2
for p in "$@"; do
  case " $FAKE_MISSING " in
  *" $p "*) ;;
  *) echo "$p install ok installed" ;;
  esac
done
SH
# apt-get: 200 lines of output; `install` exits $FAKE_INSTALL_RC. Each call is noted.
cat >"$fake/apt-get" <<'SH'
#!/usr/bin/env bash
echo "$*" >>"$FAKE_CALLS"
for i in $(seq 1 200); do echo "apt-get $1: line $i"; done
[[ $1 == install ]] && exit "${FAKE_INSTALL_RC:-0}"
exit 0
SH
printf '#!/usr/bin/env bash\nexec "$@"\n' >"$fake/sudo" # used when the test is not root
# The virtual environment's python: `-c CHECK` (is a pinned version installed) exits 1 when
# $FAKE_PY_MISSING is set, else 0; `-m pip install ...` prints 50 lines and exits $FAKE_PIP_RC.
venv=$tmp/venv
mkdir -p "$venv/bin"
cat >"$venv/bin/python" <<'SH'
#!/usr/bin/env bash
[[ $1 == -c ]] && exit $((${FAKE_PY_MISSING:-0} ? 1 : 0))
echo "python $*" >>"$FAKE_CALLS"
for i in $(seq 1 50); do echo "pip: line $i"; done
exit "${FAKE_PIP_RC:-0}"
SH
chmod +x "$fake"/* "$venv/bin/python"
export PATH=$fake:$PATH FAKE_CALLS=$tmp/calls BRICKDL_BUILD_DIR=$tmp/build BRICKDL_VENV=$venv
deps=$root/scripts/install-deps.sh
pins=$(grep -c '^[^#[:space:]]' "$root/scripts/requirements.txt")

FAKE_MISSING="" "$deps" >"$tmp/out" 2>&1 || fail "all present: exit $?"
expect_lines "$tmp/out" 2
grep -qxE 'brickdl: all [0-9]+ packages present' "$tmp/out" || fail "all present: $(cat "$tmp/out")"
grep -qx "brickdl: all $pins Python packages present ($venv)" "$tmp/out" ||
  fail "all present: $(cat "$tmp/out")"

FAKE_MISSING="cmake ccache" FAKE_PY_MISSING=1 "$deps" --dry-run >"$tmp/out" 2>&1 ||
  fail "--dry-run: exit $?"
expect_lines "$tmp/out" 2
grep -qx 'brickdl: would install 2 packages: cmake ccache' "$tmp/out" ||
  fail "--dry-run: $(cat "$tmp/out")"
grep -qE "^brickdl: would install $pins Python packages into $venv: [a-z_-]+==" "$tmp/out" ||
  fail "--dry-run: $(cat "$tmp/out")"
[[ ! -e $FAKE_CALLS ]] || fail "--dry-run ran apt-get or pip: $(cat "$FAKE_CALLS")"

FAKE_MISSING="" FAKE_PY_MISSING=1 "$deps" >"$tmp/out" 2>&1 || fail "pip install: exit $?"
expect_lines "$tmp/out" 3
grep -qE "^brickdl: installed $pins Python packages in [0-9]+ s\$" "$tmp/out" ||
  fail "pip install: $(cat "$tmp/out")"
grep -qE '^python -m pip install --disable-pip-version-check [a-z_-]+==' "$FAKE_CALLS" ||
  fail "pip was called as: $(cat "$FAKE_CALLS")"
[[ $(grep -c '^pip: ' "$tmp/build/logs/install-deps.log") -eq 50 ]] || fail "the log lacks pip's output"
FAKE_MISSING="" FAKE_PY_MISSING=1 FAKE_PIP_RC=1 "$deps" >"$tmp/out" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "a failed pip install exited $rc"
grep -qx 'pip: line 50' "$tmp/out" || fail "a failed pip install hid pip's last lines"
grep -qE "^brickdl: pip install failed after [0-9]+ s; the whole output is in " "$tmp/out" ||
  fail "a failed pip install: $(tail -n 2 "$tmp/out")"
rm -f "$FAKE_CALLS"

FAKE_MISSING="cmake ccache" "$deps" >"$tmp/out" 2>&1 || fail "install: exit $?"
expect_lines "$tmp/out" 3
log=$tmp/build/logs/install-deps.log
grep -qx "brickdl: installing 2 packages: cmake ccache (log: $log)" "$tmp/out" ||
  fail "install, first line: $(cat "$tmp/out")"
grep -qxE 'brickdl: installed 2 packages in [0-9]+ s' "$tmp/out" ||
  fail "install, last line: $(cat "$tmp/out")"
[[ $(grep -c '^apt-get ' "$log") -eq 400 ]] || fail "the log lacks apt's output"
grep -q '^install -y --no-install-recommends cmake ccache$' "$FAKE_CALLS" ||
  fail "apt-get was called as: $(cat "$FAKE_CALLS")"

FAKE_MISSING="cmake" FAKE_INSTALL_RC=100 "$deps" >"$tmp/out" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "a failed install exited $rc"
grep -qx 'apt-get install: line 200' "$tmp/out" || fail "a failed install hid apt's last lines"
grep -qE "^brickdl: apt-get install failed after [0-9]+ s; the whole output is in $log\$" \
  "$tmp/out" || fail "a failed install: $(tail -n 2 "$tmp/out")"

"$deps" --bogus >"$tmp/out" 2>&1
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q 'usage: scripts/install-deps.sh \[--dry-run\]' "$tmp/out"; then
  fail "a bad flag: exit $rc, $(cat "$tmp/out")"
fi

# ---- 2. quiet_configure / quiet_build on a small project -----------------------------------
export PATH=${PATH#"$fake":}
unset BRICKDL_BUILD_DIR
proj=$tmp/proj
mkdir -p "$proj"
sources=""
for i in $(seq 1 12); do
  echo "int f$i(int x) { return x + $i; }" >"$proj/f$i.cpp"
  sources+=" f$i.cpp"
done
echo 'int unused() { int x; return 0; }' >"$proj/warn.cpp"
cat >"$proj/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(quiet_probe CXX)
message(STATUS "brickdl: probe ON")
add_library(probe STATIC$sources warn.cpp)
target_compile_options(probe PRIVATE -Wall)
CMAKE
(
  # shellcheck source=scripts/lib/quiet.sh
  . "$root/scripts/lib/quiet.sh"
  # shellcheck disable=SC2034 # read by quiet_configure: the project to configure
  quiet_root=$proj
  cd "$tmp" || exit 1
  quiet_configure "$tmp/b" -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.out" 2>&1 || exit 1
  quiet_build "$tmp/b" >"$tmp/build.out" 2>&1 || exit 2
  quiet_build "$tmp/b" >"$tmp/again.out" 2>&1 || exit 3
  echo 'int broken( { return 0; }' >"$proj/f3.cpp"
  quiet_build "$tmp/b" >"$tmp/broken.out" 2>&1 && exit 4
  echo 'message(FATAL_ERROR "the probe needs libprobe-dev")' >>"$proj/CMakeLists.txt"
  quiet_configure "$tmp/c" >"$tmp/unconfigured.out" 2>&1 && exit 5
  exit 0
)
rc=$?
[[ $rc -eq 0 ]] || fail "step $rc of the probe build: $(cat "$tmp"/*.out)"
expect_lines "$tmp/configure.out" 1
grep -qE '^brickdl: configured b/ in [0-9]+ s \(probe ON; log: b/logs/configure.log\)$' \
  "$tmp/configure.out" || fail "configure: $(cat "$tmp/configure.out")"
grep -q 'Building CXX' "$tmp/b/logs/build.log" || fail "the build log lacks make's output"
! grep -q 'Building CXX' "$tmp/build.out" || fail "make's lines reached the output"
progress=$(grep -cE '^brickdl: building [0-9]+%  [0-9]+:[0-9]{2}$' "$tmp/build.out")
[[ $progress -ge 1 && $progress -le 10 ]] || fail "$progress progress lines: $(cat "$tmp/build.out")"
grep -q 'warn.cpp:1:.*warning: unused variable' "$tmp/build.out" ||
  fail "the warning was not printed: $(cat "$tmp/build.out")"
tail -n 1 "$tmp/build.out" |
  grep -qE '^brickdl: built b/ in [0-9]+:[0-9]{2}: 13 files compiled, 1 warning \(log: b/logs/build.log\)$' ||
  fail "closing line: $(tail -n 1 "$tmp/build.out")"
expect_lines "$tmp/again.out" 1
grep -qE '^brickdl: built b/ in [0-9]+:[0-9]{2}: 0 files compiled, 0 warnings' "$tmp/again.out" ||
  fail "nothing to do: $(cat "$tmp/again.out")"
grep -q 'f3.cpp:1:.*error:' "$tmp/broken.out" || fail "the error was hidden: $(cat "$tmp/broken.out")"
tail -n 1 "$tmp/broken.out" |
  grep -qE '^brickdl: building b/ failed \(exit [1-9][0-9]*\) after [0-9]+:[0-9]{2}; the whole output is in b/logs/build.log$' ||
  fail "failure line: $(tail -n 1 "$tmp/broken.out")"
[[ -z ${QUIET_SHOW:-} ]] || cat "$tmp"/*.out
grep -q 'the probe needs libprobe-dev' "$tmp/unconfigured.out" ||
  fail "the configure error was hidden: $(cat "$tmp/unconfigured.out")"
tail -n 1 "$tmp/unconfigured.out" |
  grep -qE '^brickdl: configuring c/ failed \(cmake exit 1\); the whole output is in c/logs/configure.log$' ||
  fail "configure failure line: $(tail -n 1 "$tmp/unconfigured.out")"
echo "quiet_scripts: passed"
