#!/usr/bin/env bash
# scripts/check-cuda.sh's plumbing on the simulated device (its `dry` mode): the script a lent GPU
# runs in one short window must not be the thing that fails there. A quick subset of its
# sections (the GPU's report, conformance on the device table with our attention kernels forced
# and with im2col convolutions, attention alone) runs from this build's binaries; every step must
# pass and the report must hold each section's steps. (The benchmark sections take minutes on
# devsim: `scripts/check-cuda.sh dry` runs them all by hand.)
# Usage: check_cuda_dry.sh BUILD_DIR
if [ $# -ne 1 ]; then echo "usage: $0 BUILD_DIR" >&2; exit 2; fi
set -uo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MIXPREC_PEAKS_FILE=off
out=$(MIXPREC_BIN="$build" MIXPREC_CHECK_SECTIONS="env conformance attention" \
  bash "$here/scripts/check-cuda.sh" dry "$work/out" 2>&1)
rc=$?
report="$work/out/report.md"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
[ "$rc" -eq 0 ] || fail "check-cuda.sh dry exited $rc: $(tail -n 5 <<< "$out")"
grep -q '(0 failure(s))' <<< "$out" || fail "check-cuda.sh dry reported failures: $(tail -n 3 <<< "$out")"
[ -s "$report" ] || fail "no report at $report"
if grep -q '\*\*FAIL\*\*' "$report" 2> /dev/null; then
  fail "report: $(grep -B 3 '\*\*FAIL\*\*' "$report" | head -n 20)"
fi
for section in '### env (' '### conformance (' '### conformance-flash (' '### conformance-im2col (' \
  '### attention-path-bf16 (' '### attention-flash-bf16 (' '## Summary'; do
  grep -qF "$section" "$report" 2> /dev/null || fail "the report has no '$section'"
done
# The conformance steps ran cases, not an empty filter.
grep -Eq '^[1-9][0-9]* passed, 0 failed' "$report" || fail "no conformance run with passing cases in the report"
[ "$failures" -eq 0 ] && echo "ok   check-cuda.sh dry: $(grep -c '^### ' "$report") steps, no failure"
exit $((failures > 0))
