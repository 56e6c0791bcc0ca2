#pragma once
// What a CPU-dependent test may expect, taken from the table of CPU classes (cpu_class.h) and
// never from the machine the test was written on. Two classes are in play:
//  - the reported class (MIXPREC_CPU_PROFILE's, or the real CPU's): what the decision logic
//    sees: the levels tests iterate, auto precision, attempted routes, log lines;
//  - the hardware class (the real CPU's): what executes: the Highway target a level really
//    runs, what oneDNN can do.
// scripts/test-cpu-profiles.sh runs every test that includes this header under every profile.
#include <set>
#include <string>

#include "mixprec/core/cpu_class.h"
#include "mixprec/core/cpu_features.h"

namespace mixprec::ctest {

inline bool is_x86_level(Isa l) { return l >= Isa::sse4 && l <= Isa::avx512_bf16; }
inline bool is_arm_level(Isa l) { return l >= Isa::neon && l <= Isa::sve2; }

/// The level that must execute for a reported level: the level itself where the hardware class
/// has it, else the hardware's best below it; a level of another architecture (an arm64
/// profile on x86-64) runs the hardware's best; scalar is always scalar.
inline Isa expected_executed_level(Isa level) {
  const CpuClass& hw = hardware_cpu_class();
  const Isa best = hw.best_level();
  if (level == Isa::scalar) return Isa::scalar;
  const bool same_arch = (is_x86_level(level) && hw.arch == CpuArch::x86_64) ||
                         (is_arm_level(level) && hw.arch == CpuArch::arm64);
  if (!same_arch) return best;
  return level < best ? level : best;
}

/// The Highway target(s) a reported level must run ('|'-separated alternatives).
inline std::string expected_target(Isa level) {
  const char* t = hardware_cpu_class().target_at(expected_executed_level(level));
  return t != nullptr ? t : "?";
}

/// How many different targets iterating every reported level must run.
inline std::size_t expected_distinct_targets() {
  std::set<std::string> targets;
  for (const CpuClassLevel& l : reported_cpu_class().levels) targets.insert(expected_target(l.level));
  return targets.size();
}

/// Whether oneDNN has a (non-reference) bf16 GEMM at the level it was capped to when the library
/// loaded (oneDNN 2.6: on AVX-512 x86-64 only; emulated without AVX512_BF16).
inline bool expected_onednn_bf16_gemm() {
  const Isa l = expected_executed_level(reported_cpu_class().best_level());
  return l == Isa::avx512 || l == Isa::avx512_bf16;
}

/// Whether oneDNN runs bf16 dot products natively at that level.
inline bool expected_onednn_native_bf16() {
  return expected_executed_level(reported_cpu_class().best_level()) == Isa::avx512_bf16;
}

}  // namespace mixprec::ctest
