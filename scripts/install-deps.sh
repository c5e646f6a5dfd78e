#!/usr/bin/env bash
# Installs the Debian packages brickdl builds and tests with (only those missing).
# The CUDA toolkit itself is expected in /usr/local/cuda (optional: without it the CPU
# backend and the model carry the whole pipeline).
#
#   scripts/install-deps.sh [--dry-run]
#
# Prints one line: "all N packages present", or "installing N packages: ..." and then
# "installed N packages in S s". apt's whole output goes to a log,
# ${BRICKDL_BUILD_DIR:-build}/logs/install-deps.log; when apt fails, its last lines and the
# log's path are printed and the exit status is 1. --dry-run prints what would be installed
# and changes nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/quiet.sh
. "$root/scripts/lib/quiet.sh"
dry_run=0
case ${1:-} in
"") ;;
--dry-run) dry_run=1 ;;
*)
  echo "usage: scripts/install-deps.sh [--dry-run]" >&2
  exit 2
  ;;
esac
packages=(
  build-essential cmake git ccache pkg-config clang-format
  libyaml-cpp-dev libsqlite3-dev sqlite3 libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libopenmpi-dev openmpi-bin
  python3 python3-matplotlib python3-numpy
  xz-utils
)
# One dpkg-query for all (it exits 1 when one is unknown to dpkg, and still lists the others).
declare -A installed=()
while read -r name state; do
  [[ $state == "install ok installed" ]] && installed[$name]=1
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  [[ -n ${installed[$p]:-} ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "brickdl: all ${#packages[@]} packages present"
  exit 0
fi
if ((dry_run)); then
  echo "brickdl: would install ${#missing[@]} packages: ${missing[*]}"
  exit 0
fi
log=$(quiet_log_dir "${BRICKDL_BUILD_DIR:-$root/build}")/install-deps.log
echo "brickdl: installing ${#missing[@]} packages: ${missing[*]} (log: $(quiet_path "$log"))"
start=$SECONDS
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
: >"$log"
step=update
if "${sudo_cmd[@]}" apt-get update >>"$log" 2>&1; then
  step=install
  # (env: sudo does not pass the caller's environment on)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
    --no-install-recommends "${missing[@]}" >>"$log" 2>&1 && step=
fi
if [[ -n $step ]]; then
  tail -n 25 "$log"
  echo "brickdl: apt-get $step failed after $((SECONDS - start)) s; the whole output is in" \
    "$(quiet_path "$log")"
  exit 1
fi
echo "brickdl: installed ${#missing[@]} packages in $((SECONDS - start)) s"
