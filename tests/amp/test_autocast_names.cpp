// amp::Autocast and the other autocast names of mixprec/amp/autocast.h are the runtime floor's own
// entities, not copies: one region, one policy table, one set of settings, whichever name a
// training loop uses.
#include <gtest/gtest.h>

#include <type_traits>

#include "mixprec/amp/autocast.h"

namespace mixprec {
namespace {

static_assert(std::is_same_v<amp::Autocast, runtime::Autocast>);
static_assert(std::is_same_v<amp::OpKind, runtime::OpKind>);
static_assert(std::is_same_v<amp::WeightCopies, runtime::WeightCopies>);
static_assert(std::is_same_v<amp::MatmulPrecision, runtime::MatmulPrecision>);
static_assert(std::is_same_v<amp::AttentionPrecision, runtime::AttentionPrecision>);
static_assert(std::is_same_v<amp::Fp8Recipe, runtime::Fp8Recipe>);

TEST(AmpAutocastNames, ARegionOpenedByEitherNameIsTheSameRegion) {
  EXPECT_FALSE(runtime::autocast_enabled());
  {
    amp::Autocast region(true, DType::f16);
    EXPECT_TRUE(runtime::autocast_enabled());
    EXPECT_EQ(runtime::autocast_dtype(), DType::f16);
    EXPECT_TRUE(amp::autocast_enabled());
  }
  EXPECT_FALSE(amp::autocast_enabled());
}

TEST(AmpAutocastNames, TheSettingsAndTheTableAreShared) {
  const runtime::MatmulPrecision before = runtime::matmul_precision();
  {
    amp::MatmulPrecisionGuard guard(amp::MatmulPrecision::medium);
    EXPECT_EQ(runtime::matmul_precision(), runtime::MatmulPrecision::medium);
  }
  EXPECT_EQ(amp::matmul_precision(), before);
  EXPECT_EQ(&amp::policy_row(amp::OpKind::linear), &runtime::policy_row(runtime::OpKind::linear));
  EXPECT_STREQ(amp::name(amp::OpKind::linear), runtime::name(runtime::OpKind::linear));
  EXPECT_EQ(&amp::weight_copies(), &runtime::weight_copies());
}

}  // namespace
}  // namespace mixprec
