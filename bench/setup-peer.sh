#!/usr/bin/env bash
# Creates (or reuses) a Python venv with torch 2.x and numpy from PyPI: the PyTorch peer that
# bench/compare.sh times mixprec against (it uses <repo>/build-peer/bin/python when that exists).
# Not part of CI. The default PyPI torch wheel also pulls the CUDA libraries (~5 GB on disk);
# only its CPU path is used. Re-running it with torch and numpy already importable installs nothing.
#
# Usage: bench/setup-peer.sh [--cpu-wheel] [--torch SPEC] [--python PY] [VENV_DIR]
#   VENV_DIR      where the venv goes (default: <repo>/build-peer, ignored by git via build*/)
#   --cpu-wheel   take torch from PyTorch's CPU-only wheel index (no CUDA libraries, ~10x
#                 smaller download) instead of PyPI; numpy still comes from PyPI
#   --torch SPEC  the pip requirement for torch (default: torch, i.e. the newest), e.g. torch==2.5.1
#   --python PY   the interpreter the venv is made from (default: python3)
# Prints the torch version and the venv's python at the end. Exit status: 0 when the venv's python
# imports torch and numpy, 1 if creating or installing failed, 2 on bad usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
CPU_INDEX="https://download.pytorch.org/whl/cpu"
venv="" cpu_wheel=0 torch_spec=torch base_python=python3

die() { echo "setup-peer.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu-wheel) cpu_wheel=1; shift ;;
    --torch) torch_spec="${2:?--torch needs a pip requirement}"; shift 2 ;;
    --python) base_python="${2:?--python needs an interpreter}"; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [[ -z "$venv" ]] || die "only one VENV_DIR, got '$venv' and '$1'"; venv="$1"; shift ;;
  esac
done
venv="${venv:-$repo/build-peer}"
py="$venv/bin/python"

# The check is also the idempotence test: nothing is downloaded when it passes.
have_peer() {
  [[ -x "$py" ]] && "$py" -c 'import numpy, torch' >/dev/null 2>&1
}

if have_peer; then
  echo "setup-peer.sh: $venv already has torch and numpy; nothing to install"
else
  if [[ ! -x "$py" ]]; then
    command -v "$base_python" >/dev/null || die "no interpreter '$base_python' (pass --python PY)"
    echo "setup-peer.sh: creating the venv $venv from $(command -v "$base_python")"
    if ! "$base_python" -m venv "$venv"; then
      echo "setup-peer.sh: '$base_python -m venv' failed (Debian: apt-get install -y python3-venv)" >&2
      exit 1
    fi
  fi
  if (( cpu_wheel )); then
    echo "setup-peer.sh: installing $torch_spec from $CPU_INDEX, numpy from PyPI"
    "$py" -m pip install --index-url "$CPU_INDEX" "$torch_spec" || exit 1
    "$py" -m pip install numpy || exit 1
  else
    echo "setup-peer.sh: installing $torch_spec and numpy from PyPI (the torch wheel pulls the" \
         "CUDA libraries: several GB, this takes a while)"
    "$py" -m pip install "$torch_spec" numpy || exit 1
  fi
  if ! have_peer; then
    echo "setup-peer.sh: the install finished but '$py' still cannot import torch and numpy:" >&2
    "$py" -c 'import numpy, torch' 2>&1 | tail -3 >&2
    exit 1
  fi
fi

"$py" -c 'import numpy, torch; print("torch %s, numpy %s" % (torch.__version__, numpy.__version__))'
echo "python for bench/compare.sh: $py"
if [[ "$(cd "$venv" && pwd)" != "$repo/build-peer" ]]; then
  echo "(not the default venv: pass it as bench/compare.sh --python $py)"
fi
