#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, and run the whole test suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "${BRICKDL_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j"${BRICKDL_JOBS:-2}" "$@"
