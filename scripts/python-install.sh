#!/usr/bin/env bash
# Installs the Python package brickdl into the virtual environment .venv (BRICKDL_VENV moves it)
# with `pip install .` (scikit-build-core, pyproject.toml), reusing the build tree
# ${BRICKDL_BUILD_DIR:-build}: what scripts/build.sh compiled is not compiled again. Run by the
# README's two commands (scripts/tune.sh, scripts/test.sh) after the build; afterwards
#
#   .venv/bin/python -c "import brickdl; print(brickdl.zoo_names())"
#
# One line: what was installed and how long it took; pip's and CMake's whole output goes to
# BUILD/logs/python-install.log, and a failure prints its end and the log's path (exit 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/quiet.sh
. "$root/scripts/lib/quiet.sh"
build=${BRICKDL_BUILD_DIR:-$root/build}
venv=${BRICKDL_VENV:-$root/.venv}
log=$(quiet_log_dir "$build")/python-install.log
start=$SECONDS
# The build tree's generator and test targets stay as scripts/build.sh configured them.
generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if ! CMAKE_GENERATOR=${generator:-Unix Makefiles} CMAKE_BUILD_PARALLEL_LEVEL=${BRICKDL_JOBS:-2} \
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-build-isolation --no-deps \
  --force-reinstall -Cbuild-dir="$build" -Ccmake.define.BRICKDL_BUILD_TESTS=ON \
  -Ccmake.define.BRICKDL_BUILD_BENCHMARKS=ON "$root" >"$log" 2>&1; then
  quiet_failure_tail "$log"
  echo "brickdl: installing the Python package failed after $((SECONDS - start)) s; the whole" \
    "output is in $(quiet_path "$log")"
  exit 1
fi
echo "brickdl: installed the Python package brickdl into $(quiet_path "$venv") in" \
  "$((SECONDS - start)) s (log: $(quiet_path "$log"))"
