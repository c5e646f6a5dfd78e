#!/usr/bin/env bash
# Configures and builds brickdl (Release) into ${BRICKDL_BUILD_DIR:-build}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BRICKDL_BUILD_DIR:-$root/build}
jobs=${BRICKDL_JOBS:-2}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${BRICKDL_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$jobs"
