#!/usr/bin/env bash
# dist.dead_rank: a rank that dies mid-run (std::exit(3), then SIGKILL) while its peers wait in
# allreduce_sum must end the whole job with a non-zero status within a bounded time, never hang.
# Open MPI's mpirun aborts the job when a rank is killed or exits without MPI_Finalize; a rank
# that exits while its peers wait skips MPI_Finalize after MIXPREC_DIST_EXIT_TIMEOUT (5 s here,
# 30 s by default; see src/dist/world.cpp).
# Usage: dead_rank.sh MPIRUN DIST_CHECK
set -uo pipefail
MPIRUN=$1 CHECK=$2
source "$(dirname "${BASH_SOURCE[0]}")/mpirun_flags.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failures=0
for np in 2 3; do
  for mode in die-exit die-kill; do
    start=$(date +%s)
    timeout 60 "$MPIRUN" -np "$np" "${MPIRUN_FLAGS[@]}" -x MIXPREC_DIST_EXIT_TIMEOUT=5 "$CHECK" "$mode" >"$log" 2>&1
    status=$?
    took=$(( $(date +%s) - start ))
    if [ "$status" -eq 124 ]; then
      echo "FAIL np=$np $mode: mpirun still running after 60 s (hang)"; tail -n 20 "$log"
      failures=$((failures + 1))
    elif [ "$status" -eq 0 ]; then
      echo "FAIL np=$np $mode: mpirun exited 0 although a rank died"; failures=$((failures + 1))
    else
      echo "ok   np=$np $mode: mpirun exited $status after ${took}s"
    fi
  done
done
[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
