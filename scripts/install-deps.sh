#!/usr/bin/env bash
# Installs the Debian packages mixprec needs to build, test and train (skips what is present).
set -euo pipefail
packages=(cmake ninja-build g++ libdnnl-dev zlib1g-dev libgtest-dev libbenchmark-dev libcli11-dev
          dataset-fashion-mnist fortunes python3-numpy nlohmann-json3-dev python3-venv libhwy-dev ccache
          libopenmpi-dev openmpi-bin clang)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
