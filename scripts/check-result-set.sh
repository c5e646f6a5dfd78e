#!/usr/bin/env bash
# Reproduces the committed CPU/model result set (results/data/reproduce-cpu.db) with this
# build and checks that everything deterministic in it is the same: workloads, candidates,
# every prediction, runs' groups and configurations, predicted plans, measurement statuses
# and counters (scripts/compare-result-sets.py says what is left out: times, ids, stamps).
#
#   scripts/check-result-set.sh [BUILD_DIR]        (default: build/)
#
# A change that means to change these numbers (a model or executor change) regenerates the
# committed set with `scripts/reproduce.sh out/reproduce-cpu` and results/store_result_set.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! BRICKDL_REPRODUCE_MODE=cpu BRICKDL_BUILD_DIR="$build" "$root/scripts/reproduce.sh" \
  "$out/set" >"$out/reproduce.out" 2>&1; then
  cat "$out/reproduce.out" "$out/set/reproduce.log" 2>/dev/null | tail -40
  echo "check-result-set: scripts/reproduce.sh failed" >&2
  exit 1
fi
python3 "$root/scripts/compare-result-sets.py" "$root/results/data/reproduce-cpu.db" \
  "$out/set/brickdl.db"
