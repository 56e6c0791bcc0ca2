// The cpu backend against the reference on every SIMD target: each conformance case
// (conformance_cases.h) runs on "ref" twice (it must be deterministic), then on "cpu" once per
// level of supported_isas() (each caps Highway's dispatch to one compiled target: SCALAR, SSE4,
// AVX2, AVX3 on x86; NEON, SVE on arm64).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "conformance/conformance_cases.h"
#include "cpu_class_expect.h"
#include "kernels/backend.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/cpu_features.h"

namespace mixprec::kernels {
namespace {

using conformance::BackendScope;
using conformance::Case;
using conformance::cases;
using conformance::compare;
using conformance::Outs;

class BackendConformance : public testing::TestWithParam<Case> {};

/// The cpu table as kernels:: calls see it: the entries it leaves empty run on its fallback.
const Backend& cpu_as_called() {
  static const Backend b = [] {
    Backend t = cpu_backend();
    const Backend& fb = t.fallback();
#define MIXPREC_FILL_FROM_FALLBACK(entry) \
  if (t.entry == nullptr) t.entry = fb.entry;
    MIXPREC_KERNEL_ENTRIES(MIXPREC_FILL_FROM_FALLBACK)
#undef MIXPREC_FILL_FROM_FALLBACK
    return t;
  }();
  return b;
}

TEST_P(BackendConformance, MatchesTheReferenceOnEveryTarget) {
  const Case& c = GetParam();
  for (DType t : c.dtypes) {
    Outs want;
    {
      BackendScope scope(ref_backend());
      want = c.run(ref_backend(), t);
    }
    {
      BackendScope scope(ref_backend());
      compare(c.run(ref_backend(), t), want, c.name + " " + name(t) + " on ref (run twice)");
    }
    BackendScope scope(cpu_backend());
    for (Isa isa : supported_isas()) {
      ktest::IsaCap cap(isa);
      const std::string where =
          c.name + " " + name(t) + " on cpu, isa " + mixprec::name(isa) + " (" + simd_target() + ")";
      compare(c.run(cpu_as_called(), t), want, where);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllKernels, BackendConformance, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& p) { return p.param.name; });

TEST(BackendConformance, EveryCpuTargetIsExercised) {
  // supported_isas() must be the levels of the CPU class in force, and each level must select
  // the Highway target the class table gives it, so the harness runs every target it claims.
  const std::vector<Isa> levels = supported_isas();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), Isa::scalar);
  EXPECT_EQ(levels.back(), reported_cpu_class().best_level());
  std::set<std::string> targets;
  for (Isa isa : levels) {
    ktest::IsaCap cap(isa);
    EXPECT_TRUE(target_matches(ctest::expected_target(isa), simd_target()))
        << name(isa) << " ran " << simd_target() << ", the table says " << ctest::expected_target(isa);
    targets.insert(simd_target());
  }
  EXPECT_EQ(targets.size(), ctest::expected_distinct_targets());
}

}  // namespace
}  // namespace mixprec::kernels
