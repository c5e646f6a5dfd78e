#!/usr/bin/env bash
# The device check on a machine that has an NVIDIA GPU AND brickdl's build dependencies (a
# workstation; a lent GPU machine has none: there, run a bundle built elsewhere, see
# scripts/device-bundle.sh):
#
#   scripts/gpu-check.sh OUTDIR
#
# Builds the device bundle (scripts/device-bundle.sh, in its own build folder) into
# <repo>/device-bundle and runs its run.sh OUTDIR: the same time-boxed stages, files and summary as on a lent machine
# (scripts/device/run.sh says which). Exit status: run.sh's (0 ok, 1 a stage failed, 3 no GPU,
# 4 a library missing), or 1 when the build fails. Environment: device-bundle.sh's
# (BRICKDL_BUNDLE_BUILD_DIR, BRICKDL_JOBS) and run.sh's (BRICKDL_DEVICE_BUDGET_S, ...).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/device-bundle.sh" "$root/device-bundle" || exit 1
exec "$root/device-bundle/run.sh" "$1"
