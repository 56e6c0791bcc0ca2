#!/usr/bin/env bash
# Runs every CPU-dependent test under every CPU class of the table (MIXPREC_CPU_PROFILE=NAME, the
# names `mixprec env --classes` lists), so a test that assumes the class it was written on fails
# on the machine running this, not on a user's. What executes stays capped to the real CPU.
#
#   bash scripts/test-cpu-profiles.sh [BUILD_DIR]      (default: build)
#
# CPU_PROFILE_RUNNER prefixes the gtest runs, e.g. to execute on an emulated AVX2-only CPU on
# any x86-64 machine: CPU_PROFILE_RUNNER="qemu-x86_64 -cpu EPYC-Rome" (Zen 2; qemu-user >= 7.2
# emulates AVX2, not AVX-512). The CLI tests always run natively.
#
# CPU-dependent tests are found, not listed by hand:
#  - gtest suites defined in a test file whose expectations read the CPU (cpu_features(),
#    supported_isas(), isa_allowed(), the class table or cpu_class_expect.h, the auto-precision
#    rules): every suite of such a file runs, under every profile;
#  - CLI tests with the ctest label cpu_class (tests/cli/CMakeLists.txt).
# The last line is "cpu profiles: N passed, M failed"; the exit status is 0 only if none failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
tests_bin=$build/tests/mixprec_tests
cli=$build/mixprec
[[ -x $tests_bin && -x $cli ]] || { echo "test-cpu-profiles: build $build first (no $tests_bin or $cli)" >&2; exit 2; }
started=$(date +%s)

# What marks a test file as CPU-dependent: its expectations read the CPU (features, levels,
# the class table and cpu_class_expect.h, the auto-precision rules). Files that only loop over
# isas_to_test() to compare each target with the reference expect the same thing on every class.
reads_cpu='cpu_features\(\)|isa_allowed\(|supported_isas\(\)|cpu_class|executed_isa|hardware_cpu|choose_precision|default_layer_compute|precision_warnings|speedup_limit_reason'
mapfile -t files < <(grep -rlE "$reads_cpu" "$root/tests" --include='*.cpp' | sort)
mapfile -t suites < <(grep -ohE '^(TEST|TEST_F|TEST_P|TYPED_TEST)\(([A-Za-z0-9_]+),' "${files[@]}" |
                      sed -E 's/^[A-Z_]+\(([A-Za-z0-9_]+),/\1/' | sort -u)
# '*Suite.*' also matches parameterised instances (Prefix/Suite.Name/Param).
filter=$(printf '*%s.*:' "${suites[@]}")
filter=${filter%:}
mapfile -t profiles < <("$cli" env --classes --json | python3 -c 'import json,sys
for c in json.load(sys.stdin): print(c["name"])')
echo "test-cpu-profiles: ${#suites[@]} gtest suites from ${#files[@]} files, ctest label cpu_class; profiles: ${profiles[*]}"

passed=0
failed=0
for p in "${profiles[@]}"; do
  t0=$(date +%s)
  log=$build/cpu-profile-$p.log
  ok=1
  # shellcheck disable=SC2086
  MIXPREC_CPU_PROFILE=$p OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ${CPU_PROFILE_RUNNER:-} "$tests_bin" --gtest_filter="$filter" \
    --gtest_brief=1 > "$log" 2>&1 || ok=0
  MIXPREC_CPU_PROFILE=$p ctest --test-dir "$build" -L cpu_class --output-on-failure >> "$log" 2>&1 || ok=0
  gtests=$(grep -oE '[0-9]+ tests? from [0-9]+ test suites? ran' "$log" | head -1)
  if ((ok)); then
    passed=$((passed + 1))
    echo "ok   $p: $gtests, CLI tests passed ($(($(date +%s) - t0)) s)"
  else
    failed=$((failed + 1))
    echo "FAIL $p ($(($(date +%s) - t0)) s), log $log:"
    grep -E '^\[  FAILED  \]|Failure|FAIL |tests failed' "$log" | head -20
  fi
done
echo "test-cpu-profiles: done in $(($(date +%s) - started)) s"
echo "cpu profiles: $passed passed, $failed failed"
((failed == 0))
