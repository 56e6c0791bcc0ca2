#!/usr/bin/env bash
# Installs the Debian packages mixprec needs to build, test and train (skips what is present).
set -euo pipefail
# libjpeg62-turbo-dev and libpng-dev decode --data images: (each optional at build time; the arm64
# cross build of scripts/check-arm64.sh has neither and compiles both formats out).
packages=(cmake ninja-build g++ libdnnl-dev zlib1g-dev libgtest-dev libbenchmark-dev libcli11-dev
          dataset-fashion-mnist fortunes python3-numpy nlohmann-json3-dev python3-venv libhwy-dev ccache
          libopenmpi-dev openmpi-bin clang libjpeg62-turbo-dev libpng-dev)
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

# NVIDIA's cuDNN frontend (header-only C++; the cuDNN attention path, docs/cuda.md "How cuDNN is
# found"). Only the CUDA build uses it, and it is optional there: CMake compiles the cuDNN path
# out when the headers are absent. PyPI's wheel carries the headers under include/; Debian's
# python is externally managed, so pip only downloads the wheel (inside a throwaway venv, whose
# pip needs no system pip) and the headers are unpacked into the ignored build-deps/ folder.
# Idempotent: skipped when that version is present. MIXPREC_SKIP_CUDNN_FRONTEND=1 skips it.
cudnn_fe_version=1.32.0
cudnn_fe_dir="$(cd "$(dirname "$0")/.." && pwd)/build-deps/cudnn-frontend"
if [ "${MIXPREC_SKIP_CUDNN_FRONTEND:-0}" != 1 ] &&
   ! grep -qx "$cudnn_fe_version" "$cudnn_fe_dir/VERSION" 2>/dev/null; then
  echo "install-deps: cuDNN frontend $cudnn_fe_version -> $cudnn_fe_dir"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  pip_cmd=()
  if python3 -m pip --version >/dev/null 2>&1; then
    pip_cmd=(python3 -m pip)
  elif python3 -m venv "$tmp/venv" >/dev/null 2>&1 && "$tmp/venv/bin/python" -m pip --version >/dev/null 2>&1; then
    pip_cmd=("$tmp/venv/bin/python" -m pip)
  fi
  if ((${#pip_cmd[@]})) &&
     "${pip_cmd[@]}" download -q --no-deps --only-binary=:all: -d "$tmp/wheel" \
       --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_28_x86_64 \
       "nvidia-cudnn-frontend==$cudnn_fe_version"; then
    rm -rf "$cudnn_fe_dir"
    mkdir -p "$cudnn_fe_dir"
    # Every wheel has the same headers, so one fixed wheel (CPython 3.11, x86-64) serves any host
    # python and architecture: unpack include/ only (python's zipfile: no unzip needed).
    python3 - "$tmp"/wheel/*.whl "$cudnn_fe_dir" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith("include/")]
    if not any(m.endswith("cudnn_frontend.h") for m in members):
        sys.exit(f"install-deps: {wheel} has no include/cudnn_frontend.h")
    z.extractall(dest, members)
PY
    echo "$cudnn_fe_version" > "$cudnn_fe_dir/VERSION"
  else
    echo "install-deps: could not download nvidia-cudnn-frontend==$cudnn_fe_version (no pip or no" \
         "network); the CUDA build compiles the cuDNN path out" >&2
  fi
fi
