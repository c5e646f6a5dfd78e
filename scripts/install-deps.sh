#!/usr/bin/env bash
# Installs the Debian packages brickdl builds and tests with (only those missing), then the
# Python packages of scripts/requirements.txt from PyPI into the virtual environment .venv
# (BRICKDL_VENV moves it; only when they are missing or another version): the `onnx` package whose node tests
# (opsets past Debian's libonnx-testdata) ctest onnx_node_tests_current runs, and what the Python
# package brickdl is built, tested and used with (nanobind, scikit-build-core, pytest, pandas). The CUDA toolkit
# itself is expected in /usr/local/cuda (optional: without it the CPU backend and the model
# carry the whole pipeline).
#
#   scripts/install-deps.sh [--dry-run]
#
# Prints one line per step: "all N packages present", or "installing N packages: ..." and then
# "installed N packages in S s"; the same for the Python packages. apt's and pip's whole output
# goes to a log, ${BRICKDL_BUILD_DIR:-build}/logs/install-deps.log; when one fails, its last
# lines and the log's path are printed and the exit status is 1. --dry-run prints what would be
# installed and changes nothing.
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
  libxsmm-dev libdnnl-dev
  python3 python3-dev python3-matplotlib python3-numpy python3-venv
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
log=
open_log() {
  [[ -n $log ]] && return
  log=$(quiet_log_dir "${BRICKDL_BUILD_DIR:-$root/build}")/install-deps.log
  : >"$log"
}
fail() { # what, start
  tail -n 25 "$log"
  echo "brickdl: $1 failed after $((SECONDS - $2)) s; the whole output is in $(quiet_path "$log")"
  exit 1
}

apt_step() {
  if ((${#missing[@]} == 0)); then
    echo "brickdl: all ${#packages[@]} packages present"
    return
  fi
  if ((dry_run)); then
    echo "brickdl: would install ${#missing[@]} packages: ${missing[*]}"
    return
  fi
  open_log
  echo "brickdl: installing ${#missing[@]} packages: ${missing[*]} (log: $(quiet_path "$log"))"
  local start=$SECONDS sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update >>"$log" 2>&1 || fail "apt-get update" "$start"
  # (env: sudo does not pass the caller's environment on)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
    --no-install-recommends "${missing[@]}" >>"$log" 2>&1 || fail "apt-get install" "$start"
  echo "brickdl: installed ${#missing[@]} packages in $((SECONDS - start)) s"
}

# The pinned Python packages: `name==version` lines of scripts/requirements.txt.
pip_step() {
  local venv=${BRICKDL_VENV:-$root/.venv} requirements=$root/scripts/requirements.txt pins=() want=()
  local shown
  shown=$(quiet_path "$venv")
  mapfile -t pins < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$requirements")
  for pin in "${pins[@]}"; do
    # importlib.metadata knows the installed version whatever the import name is
    "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('${pin%%==*}') != '${pin##*==}')" >/dev/null 2>&1 || want+=("$pin")
  done
  if ((${#want[@]} == 0)); then
    echo "brickdl: all ${#pins[@]} Python packages present ($shown)"
    return
  fi
  if ((dry_run)); then
    echo "brickdl: would install ${#want[@]} Python packages into $shown: ${want[*]}"
    return
  fi
  open_log
  echo "brickdl: installing ${#want[@]} Python packages into $shown: ${want[*]}" \
    "(log: $(quiet_path "$log"))"
  local start=$SECONDS
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv" >>"$log" 2>&1 || fail "python3 -m venv" "$start"
  "$venv/bin/python" -m pip install --disable-pip-version-check "${want[@]}" >>"$log" 2>&1 ||
    fail "pip install" "$start"
  echo "brickdl: installed ${#want[@]} Python packages in $((SECONDS - start)) s"
}

apt_step
pip_step
