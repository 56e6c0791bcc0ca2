#!/usr/bin/env bash
# dist.mpirun_N: runs mixprec_dist_check on N ranks of this machine; every rank must pass.
# Usage: mpirun_check.sh MPIRUN DIST_CHECK N
set -uo pipefail
MPIRUN=$1 CHECK=$2 NP=$3
source "$(dirname "${BASH_SOURCE[0]}")/mpirun_flags.sh"
start=$(date +%s)
timeout 90 "$MPIRUN" -np "$NP" "${MPIRUN_FLAGS[@]}" "$CHECK" check "$NP"
status=$?
echo "mpirun -np $NP: exit $status after $(( $(date +%s) - start ))s"
[ "$status" -eq 124 ] && echo "FAIL: timed out (a collective hung)"
exit "$status"
