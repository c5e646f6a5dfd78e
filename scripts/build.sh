#!/usr/bin/env bash
# Configures and builds brickdl (Release) into ${BRICKDL_BUILD_DIR:-build}:
#
#   scripts/build.sh [TARGET...]        (default: every target)
#
# Prints one line for the configure step, a compact progress of the build and one closing line
# (files compiled, warnings, the log); the whole output is in BUILD/logs/configure.log and
# BUILD/logs/build.log. A failure prints the errors and the log's path, and exits non-zero;
# every compiler warning is printed (scripts/lib/quiet.sh). Environment: BRICKDL_JOBS (default
# 2), BRICKDL_CMAKE_ARGS (added to the configure step), BRICKDL_VERBOSE=1 (the whole output).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/quiet.sh
. "$root/scripts/lib/quiet.sh"
build=${BRICKDL_BUILD_DIR:-$root/build}
# shellcheck disable=SC2086 # BRICKDL_CMAKE_ARGS is split into words on purpose
quiet_configure "$build" -DCMAKE_BUILD_TYPE=Release ${BRICKDL_CMAKE_ARGS:-}
quiet_build "$build" "$@"
