#!/usr/bin/env bash
# The last build by scripts/build.sh printed no compiler or CMake warning (ctest
# build_log_warnings): CI builds a fresh clone with it, so there this covers every file.
#
#   tests/cli/build_log_test.sh BUILD_DIR
# Exit 0: no warning; 1: the warnings are listed; 77: no log (built without scripts/build.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/lib/quiet.sh
. "$root/scripts/lib/quiet.sh"
logs=()
for f in "$1/logs/configure.log" "$1/logs/build.log"; do
  [[ -f $f ]] && logs+=("$f")
done
if ((${#logs[@]} == 0)); then
  echo "build_log_warnings: no log in $1/logs (built without scripts/build.sh); skipped"
  exit 77
fi
status=0
for f in "${logs[@]}"; do
  warnings=$(quiet_warnings "$f")
  if [[ -n $warnings ]]; then
    echo "build_log_warnings: $f holds $(printf '%s\n' "$warnings" | wc -l) warning(s):"
    printf '%s\n' "$warnings"
    status=1
  fi
done
((status)) || echo "build_log_warnings: no warning in ${logs[*]}"
exit $status
