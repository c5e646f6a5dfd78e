#!/usr/bin/env bash
# Installs the Debian packages brickdl builds and tests with (only those missing).
# The CUDA toolkit itself is expected in /usr/local/cuda (optional: without it the CPU
# backend and the model carry the whole pipeline).
set -euo pipefail
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
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "brickdl: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
