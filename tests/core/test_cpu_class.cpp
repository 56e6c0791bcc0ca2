// The table of CPU classes (cpu_class.h) against the decision logic, for every row on every
// machine; and the class in force (MIXPREC_CPU_PROFILE's or the real CPU's) against what this
// process really does. scripts/test-cpu-profiles.sh runs this file under every profile.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "cpu_class_expect.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/cpu_class.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/train/step_bench.h"

namespace mixprec {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<Isa> levels_of(const CpuClass& c) {
  std::vector<Isa> v;
  for (const CpuClassLevel& l : c.levels) v.push_back(l.level);
  return v;
}

TEST(CpuClassTable, HasTheClassesWeSupportWithUniqueNames) {
  std::set<std::string> names;
  for (const CpuClass& c : cpu_classes()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate class " << c.name;
    EXPECT_EQ(find_cpu_class(c.name), &c);
    ASSERT_FALSE(c.levels.empty()) << c.name;
    EXPECT_EQ(c.levels.front().level, Isa::scalar) << c.name;
  }
  for (const char* required :
       {"zen2", "skylake-sp", "zen4", "sapphire-rapids", "arm64-neon", "graviton3"}) {
    EXPECT_NE(find_cpu_class(required), nullptr) << required;
  }
  EXPECT_EQ(find_cpu_class("pentium4"), nullptr);
}

TEST(CpuClassTable, EveryRowClassifiesAsItself) {
  for (const CpuClass& c : cpu_classes()) EXPECT_STREQ(classify_cpu(c.features).name, c.name);
}

TEST(CpuClassTable, UnlistedCpuGoesToTheNearestClassOfItsLevel) {
  // Cascade Lake is Skylake-SP plus VNNI, which no decision reads: same flags here.
  CpuFeatures icelake = find_cpu_class("skylake-sp")->features;
  EXPECT_STREQ(classify_cpu(icelake).name, "skylake-sp");
  // A Cortex-A72 (NEON without FP16 arithmetic) is nearest to the NEON class.
  CpuFeatures a72 = find_cpu_class("arm64-neon")->features;
  a72.arm_fp16 = false;
  EXPECT_STREQ(classify_cpu(a72).name, "arm64-neon");
  // AVX2 without F16C is an SSE4-level CPU for mixprec.
  CpuFeatures no_f16c = find_cpu_class("zen2")->features;
  no_f16c.f16c = false;
  EXPECT_STREQ(classify_cpu(no_f16c).name, "x86-64-v2");
}

TEST(CpuClassTable, LevelsAreWhatDetectionAllowsOnEveryClass) {
  for (const CpuClass& c : cpu_classes()) {
    EXPECT_EQ(isa_levels_of(c.features), levels_of(c)) << c.name;
    EXPECT_EQ(best_isa_of(c.features), c.best_level()) << c.name;
  }
}

TEST(CpuClassTable, AutoPrecisionAndItsReasonOnEveryClass) {
  for (const CpuClass& c : cpu_classes()) {
    const amp::PrecisionChoice choice = amp::choose_precision(c.features);
    EXPECT_STREQ(amp::name(choice.mode), c.auto_precision) << c.name;
    EXPECT_TRUE(contains(choice.reason, c.auto_reason_mentions))
        << c.name << ": '" << choice.reason << "' does not mention '" << c.auto_reason_mentions << "'";
  }
}

TEST(CpuClassTable, AutoLayerStartsInTheClasssDtypeOnEveryClass) {
  for (const CpuClass& c : cpu_classes()) {
    EXPECT_EQ(amp::default_layer_compute(c.features), c.layer_compute) << c.name;
  }
}

TEST(CpuClassTable, Bf16SpeedUpLimitIsStatedExactlyWhereItHolds) {
  for (const CpuClass& c : cpu_classes()) {
    EXPECT_EQ(!train::speedup_limit_reason(c.features).empty(), c.bf16_speedup_limited) << c.name;
    const std::string w = amp::precision_warnings(amp::PrecisionMode::bf16, false, c.features);
    EXPECT_EQ(contains(w, "no speed-up"), c.bf16_speedup_limited) << c.name << ": " << w;
    // The note names this architecture's units, never the other's.
    const std::string limit = train::speedup_limit_reason(c.features);
    if (c.arch == CpuArch::arm64) {
      EXPECT_FALSE(contains(w, "AVX512")) << c.name << ": " << w;
      EXPECT_FALSE(contains(limit, "AVX512")) << c.name << ": " << limit;
    }
  }
}

TEST(CpuClassTable, AutoPicksBf16ExactlyWhereBf16GemmsAreNative) {
  for (const CpuClass& c : cpu_classes()) {
    EXPECT_EQ(std::string(c.auto_precision) == "bf16", c.bf16_gemm_native) << c.name;
    EXPECT_EQ(c.bf16_gemm_native, !c.bf16_speedup_limited) << c.name;
  }
}

TEST(CpuClassTable, TargetMatchingTakesAlternatives) {
  EXPECT_TRUE(target_matches("SVE_256|SVE", "SVE"));
  EXPECT_TRUE(target_matches("SVE_256|SVE", "SVE_256"));
  EXPECT_FALSE(target_matches("SVE_256|SVE", "SVE2"));
  EXPECT_TRUE(target_matches("AVX3", "AVX3"));
  EXPECT_FALSE(target_matches("AVX3", "AVX2"));
}

// --- The class in force, in this process ------------------------------------------------------

TEST(CpuClassInForce, ProfileIsReportedAndHardwareStillExecutes) {
  const char* env = std::getenv("MIXPREC_CPU_PROFILE");
  const CpuClass* asked = env != nullptr ? find_cpu_class(env) : nullptr;
  if (asked != nullptr) {
    EXPECT_EQ(cpu_profile(), asked->name);
    EXPECT_EQ(&reported_cpu_class(), asked);
    EXPECT_EQ(cpu_features().to_string(), asked->features.to_string());
    EXPECT_TRUE(cpu_profile_warning().empty());
  } else {
    EXPECT_EQ(cpu_profile(), "");
    EXPECT_EQ(cpu_features().to_string(), hardware_cpu_features().to_string());
    EXPECT_EQ(&reported_cpu_class(), &hardware_cpu_class());
    // An unknown name warns, naming every known class, and the real CPU is used.
    if (env != nullptr && *env != '\0') {
      EXPECT_TRUE(contains(cpu_profile_warning(), "is not a known CPU class"));
      for (const CpuClass& c : cpu_classes()) EXPECT_TRUE(contains(cpu_profile_warning(), c.name));
    }
  }
  EXPECT_EQ(supported_isas(), levels_of(reported_cpu_class()));
}

TEST(CpuClassInForce, EveryLevelRunsTheTargetTheTableSays) {
  std::set<std::string> ran;
  for (const Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    EXPECT_EQ(max_isa(), isa);
    EXPECT_EQ(executed_isa(), ctest::expected_executed_level(isa)) << name(isa);
    EXPECT_TRUE(target_matches(ctest::expected_target(isa), simd_target()))
        << name(isa) << " ran " << simd_target() << ", the table says " << ctest::expected_target(isa);
    ran.insert(simd_target());
  }
  EXPECT_EQ(ran.size(), ctest::expected_distinct_targets());
}

TEST(CpuClassInForce, OnednnRunsAtTheLevelThatExecutes) {
  const std::string d = onednn_description();
  const CpuClass& hw = hardware_cpu_class();
  const Isa level = ctest::expected_executed_level(reported_cpu_class().best_level());
  std::string want = hw.onednn_isa;
  if (level != hw.best_level()) {
    // Capped below the hardware (a profile of a lesser class): oneDNN is capped alike.
    want = level == Isa::avx2 ? "isa avx2"
           : level == Isa::avx512 || level == Isa::avx512_bf16 ? "isa avx512_core"
                                                               : "isa below avx2";
  }
  bool found = false;
  for (std::string_view alternatives = want;;) {
    const std::size_t bar = alternatives.find('|');
    found = found || contains(d, std::string(alternatives.substr(0, bar)));
    if (bar == std::string_view::npos) break;
    alternatives.remove_prefix(bar + 1);
  }
  EXPECT_TRUE(found) << d << " does not name " << want;
}

TEST(CpuClassInForce, DecisionsFollowTheReportedClass) {
  const CpuClass& c = reported_cpu_class();
  EXPECT_STREQ(amp::name(amp::choose_precision(cpu_features()).mode), c.auto_precision);
  EXPECT_EQ(amp::default_layer_compute(cpu_features()), c.layer_compute);
  EXPECT_EQ(isa_allowed(Isa::avx512_bf16), c.bf16_gemm_native);
}

}  // namespace
}  // namespace mixprec
