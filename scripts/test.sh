#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, install the Python package into .venv
# (scripts/python-install.sh), run the whole test suite, then the
# same tests under AddressSanitizer + UndefinedBehaviorSanitizer and the CPU executor's under
# ThreadSanitizer (scripts/sanitize.sh, each in its own build folder). Arguments go to the
# first ctest. BRICKDL_SANITIZERS=0 skips the sanitizer builds (they about double the time).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
"$root/scripts/python-install.sh"
(cd "${BRICKDL_BUILD_DIR:-$root/build}" && ctest --output-on-failure -j"${BRICKDL_JOBS:-2}" "$@")
if [[ ${BRICKDL_SANITIZERS:-1} != 0 ]]; then
  "$root/scripts/sanitize.sh" all
fi
