#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, CMake option MIXPREC_FUZZ, clang) in build-fuzz and runs
# each for SECONDS on a copy of its seed corpus (fuzz/corpus/<target>; the committed corpus never
# grows), with its dictionary fuzz/<target>.dict if there is one. Prints per target the
# executions, coverage (cov: edges, ft: features) and whether it crashed; a crash, leak, timeout
# or out-of-memory input is kept in build-fuzz/artifacts/<target>/, and the script exits non-zero.
#
#   bash scripts/fuzz.sh SECONDS [TARGET...]     e.g. bash scripts/fuzz.sh 60 fuzz_csv
#   FUZZ_PARALLEL=2 bash scripts/fuzz.sh 20      two targets at a time (CI, on 2 cores)
#
# Reproduce a finding: build-fuzz/fuzz/<target> build-fuzz/artifacts/<target>/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 1)) || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: bash scripts/fuzz.sh SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
command -v clang++ > /dev/null || { echo "fuzz.sh: needs clang (Debian: apt-get install clang)" >&2; exit 2; }

LAUNCHER=()
if command -v ccache > /dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd .. && pwd)}" CCACHE_NOHASHDIR=1
fi
# -O1 -g: fast enough to fuzz, and a finding's stack trace has line numbers. Only the library and
# the fuzz targets are built here, the library as a unity build (MIXPREC_UNITY_BUILD: a cold
# build compiles each group's headers once, not once per file).
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g" -DMIXPREC_UNITY_BUILD=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMIXPREC_FUZZ=ON -DMIXPREC_MPI=OFF \
  -DMIXPREC_BUILD_TESTS=OFF -DMIXPREC_BUILD_BENCHMARKS=OFF -DMIXPREC_BUILD_EXAMPLES=OFF \
  -DMIXPREC_BUILD_TOOLS=OFF "${LAUNCHER[@]}" > /dev/null
cmake --build build-fuzz -j"${FUZZ_JOBS:-2}"

targets=("$@")
if ((${#targets[@]} == 0)); then
  for src in fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/.ci/lsan.supp:${LSAN_OPTIONS:-}"
export OMP_NUM_THREADS=1
# FUZZ_PARALLEL (default 1) targets fuzz at once: each is one process on one core
# (OMP_NUM_THREADS=1) with its own scratch directory, work corpus and artifacts, so CI runs two
# on its 2 cores and each target still gets its SECONDS of one core.
parallel=${FUZZ_PARALLEL:-1}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_PARALLEL must be a positive number" >&2; exit 2; }
for t in "${targets[@]}"; do
  [[ -x build-fuzz/fuzz/$t ]] || { echo "fuzz.sh: no target $t (fuzz/$t.cpp)" >&2; exit 2; }
done
# fuzz_one TARGET: runs it and writes its line of the table to build-fuzz/result-TARGET
# (the line starts with "CRASH" after the name if it found something).
fuzz_one() {
  local t=$1 bin work artifacts log status execs last cov ft found result
  bin=build-fuzz/fuzz/$t
  work=build-fuzz/corpus-run/$t
  artifacts=build-fuzz/artifacts/$t
  rm -rf "$work" "$artifacts"
  mkdir -p "$work" "$artifacts"
  [[ -d fuzz/corpus/$t ]] && cp fuzz/corpus/"$t"/* "$work"/
  local dict=()
  [[ -f fuzz/$t.dict ]] && dict=(-dict="fuzz/$t.dict")
  log=build-fuzz/fuzz-$t.log
  # -timeout: an input taking over 10 s is a hang; -rss_limit_mb: an input needing > 2 GB is an
  # allocation a hostile file should not be able to trigger.
  status=0
  "$bin" "$work" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$artifacts/" > "$log" 2>&1 || status=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(grep -o 'cov: [0-9]*' <<< "$last" | grep -o '[0-9]*' || true)
  ft=$(grep -o 'ft: [0-9]*' <<< "$last" | grep -o '[0-9]*' || true)
  found=$(find "$artifacts" -type f | head -n 1)
  if ((status != 0)) || [[ -n $found ]]; then
    result="CRASH (exit $status) ${found:-see $log}"
  else
    result=ok
  fi
  printf '%-26s %12s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$result" > "build-fuzz/result-$t"
}
rm -f build-fuzz/result-*
running=0
for t in "${targets[@]}"; do
  if ((running >= parallel)); then
    wait -n || true  # a target's outcome is in its result file
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait || true
failed=()
printf '%-26s %12s %8s %8s  %s\n' target executions cov ft result
for t in "${targets[@]}"; do
  if [[ -f build-fuzz/result-$t ]]; then
    cat "build-fuzz/result-$t"
    if grep -q ' CRASH ' "build-fuzz/result-$t"; then failed+=("$t"); fi
  else
    echo "$t: no result (the run did not finish)"
    failed+=("$t")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz.sh: findings in ${failed[*]}; logs in build-fuzz/fuzz-<target>.log" >&2
  exit 1
fi
