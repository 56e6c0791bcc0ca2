// The numeric core of `mixprec inspect`: cast-outcome thresholds against the exact quantiser,
// counts on hand-made values, the Inf rule per source dtype, and the flush-to-zero fraction at a
// loss scale computed from the binade histogram against a direct count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/tensor_stats.h"
#include "mixprec/numerics/formats.h"

namespace mixprec::numerics {
namespace {


CastOutcome quantizer_outcome(double a, const numerics::FormatInfo& f) {
  const double q = numerics::quantize(a, f);
  if (!std::isfinite(q)) return CastOutcome::overflow;
  if (q == 0) return CastOutcome::zero;
  if (std::fabs(q) < f.min_normal) return CastOutcome::subnormal;
  return CastOutcome::normal;
}

TEST(CastThresholds, AgreeWithTheQuantiserAtEveryBoundaryAndAcrossTheRange) {
  std::mt19937_64 rng(7);
  for (Format format : kInspectFormats) {
    const numerics::FormatInfo& f = numerics::format_info(format);
    const CastThresholds& t = cast_thresholds(format);
    std::vector<double> probes = {f.min_subnormal, f.min_normal, f.max, t.zero_max,
                                  t.subnormal_end, t.overflow_start};
    for (double b : {t.zero_max, t.subnormal_end, t.overflow_start, f.min_normal, f.max}) {
      probes.push_back(std::nextafter(b, 0.0));
      probes.push_back(std::nextafter(b, 1e300));
    }
    std::uniform_real_distribution<double> log2_mag(std::log2(f.min_subnormal) - 4, std::log2(f.max) + 3);
    for (int i = 0; i < 20000; ++i) probes.push_back(std::exp2(log2_mag(rng)));
    for (double a : probes) {
      ASSERT_EQ(t.classify(a), quantizer_outcome(a, f)) << f.name << " at " << a;
    }
  }
}

TEST(CastThresholds, FollowTheFormatTable) {
  // fp16: flush at or below 2^-25, subnormal below 2^-14 - 2^-25, overflow from 65520 (the tie
  // rounds to even, away from 65504's odd mantissa); E4M3 keeps its tie at 464 (448 is even).
  const CastThresholds& h = cast_thresholds(Format::fp16);
  EXPECT_EQ(h.zero_max, std::ldexp(1.0, -25));
  EXPECT_EQ(h.subnormal_end, std::ldexp(1.0, -14) - std::ldexp(1.0, -25));
  EXPECT_EQ(h.overflow_start, 65520.0);
  EXPECT_TRUE(h.overflow_at_tie);
  const CastThresholds& e4 = cast_thresholds(Format::fp8_e4m3);
  EXPECT_EQ(e4.overflow_start, 464.0);
  EXPECT_FALSE(e4.overflow_at_tie);
  EXPECT_THROW(inspect_format_index(Format::fp32), ValueError);
}

TEST(TensorStats, CountsHandMadeValues) {
  TensorStats s;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (double v : {1e5, -1e-9, 1e-6, 0.0, nan, -inf, 1.0}) s.add(v);
  EXPECT_EQ(s.count, 7);
  EXPECT_EQ(s.zeros, 1);
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 1);
  EXPECT_EQ(s.amax, 1e5);
  EXPECT_EQ(s.amin_nonzero, 1e-9);
  const CastCounts& fp16 = s.cast[inspect_format_index(Format::fp16)];
  EXPECT_EQ(fp16.overflow, 2);   // 1e5 and -Inf
  EXPECT_EQ(fp16.underflow, 1);  // 1e-9 < 2^-25
  EXPECT_EQ(fp16.subnormal, 1);  // 1e-6 < 2^-14
  const CastCounts& bf16 = s.cast[inspect_format_index(Format::bf16)];
  EXPECT_EQ(bf16.overflow, 1);
  EXPECT_EQ(bf16.underflow, 0);
  EXPECT_EQ(bf16.subnormal, 0);
  const CastCounts& e4m3 = s.cast[inspect_format_index(Format::fp8_e4m3)];
  EXPECT_EQ(e4m3.overflow, 2);
  EXPECT_EQ(e4m3.underflow, 2);  // 1e-9 and 1e-6 are below 2^-10
  EXPECT_DOUBLE_EQ(s.overflow_fraction(Format::fp16), 2.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.underflow_fraction(Format::fp8_e5m2), 2.0 / 7.0);
}

TEST(TensorStats, InfInAnF16TensorIsAnFp16OverflowButNotABf16One) {
  const float inf = std::numeric_limits<float>::infinity();
  TensorStats from_f16, from_f32;
  from_f16.add(Tensor::from_vector({inf, 1.0f}, {2}, DType::f16));
  from_f32.add(Tensor::from_vector({inf, 1.0f}, {2}, DType::f32));
  EXPECT_EQ(from_f16.overflow_fraction(Format::fp16), 0.5);
  EXPECT_EQ(from_f16.overflow_fraction(Format::fp8_e5m2), 0.5);
  EXPECT_EQ(from_f16.overflow_fraction(Format::bf16), 0.0);
  EXPECT_EQ(from_f32.overflow_fraction(Format::bf16), 0.5);
}

TEST(TensorStats, ReadsStridedTensorsAndAppliesTheMultiplier) {
  // A transposed view: every element once, whatever the strides.
  const Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  ASSERT_FALSE(t.is_contiguous());
  TensorStats s;
  s.add(t, 0.25);
  EXPECT_EQ(s.count, 6);
  EXPECT_EQ(s.amax, 1.5);
  EXPECT_EQ(s.amin_nonzero, 0.25);
}

TEST(TensorStats, UnderflowAtAScaleEqualsADirectCountOfScaledValues) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> log10_mag(-14, 3);
  std::vector<double> values;
  for (int i = 0; i < 50000; ++i) values.push_back(static_cast<float>(std::pow(10.0, log10_mag(rng))));
  // Exact powers of two at and around the fp16 and e4m3 flush thresholds decide ties.
  for (int e = -40; e <= -5; ++e) values.push_back(std::ldexp(1.0, e));
  TensorStats unscaled;
  for (double v : values) unscaled.add(v);
  for (int k : {-3, 0, 1, 5, 10, 16, 24}) {
    TensorStats scaled;
    for (double v : values) scaled.add(v, std::ldexp(1.0, k));
    for (Format f : kInspectFormats) {
      EXPECT_EQ(unscaled.underflow_fraction_at_scale(f, k), scaled.underflow_fraction(f))
          << numerics::format_info(f).name << " at 2^" << k;
    }
  }
}

TEST(TensorStats, MergeEqualsAddingEverythingToOne) {
  TensorStats a, b, all;
  for (double v : {3.0, 1e-7, 0.0}) {
    a.add(v);
    all.add(v);
  }
  for (double v : {1e6, 2e-30}) {
    b.add(v);
    all.add(v);
  }
  a.merge(b);
  EXPECT_EQ(a.count, all.count);
  EXPECT_EQ(a.amax, all.amax);
  EXPECT_EQ(a.amin_nonzero, all.amin_nonzero);
  EXPECT_EQ(a.binades, all.binades);
  for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
    EXPECT_EQ(a.cast[i].overflow, all.cast[i].overflow);
    EXPECT_EQ(a.cast[i].underflow, all.cast[i].underflow);
    EXPECT_EQ(a.cast[i].subnormal, all.cast[i].subnormal);
  }
}

TEST(HalfUlp, IsHalfTheSpacingIncludingSubnormals) {
  const numerics::FormatInfo& fp16 = numerics::format_info(Format::fp16);
  const numerics::FormatInfo& bf16 = numerics::format_info(Format::bf16);
  EXPECT_EQ(half_ulp(1.0, fp16), std::ldexp(1.0, -11));
  EXPECT_EQ(half_ulp(-1.5, bf16), std::ldexp(1.0, -8));
  EXPECT_EQ(half_ulp(1000.0, fp16), 0.25);
  EXPECT_EQ(half_ulp(1e-6, fp16), std::ldexp(1.0, -25));  // subnormal: fixed spacing 2^-24
  EXPECT_THROW(half_ulp(0.0, fp16), ValueError);
  EXPECT_THROW(half_ulp(std::numeric_limits<double>::infinity(), fp16), ValueError);
}

TEST(LostUpdates, AgreeWithTheQuantiserOnRepresentableWeights) {
  // For a weight w held exactly in the format (not a power of two, whose lower neighbour is
  // closer), an update is lost by the half-ulp rule exactly when rounding w + dw gives w back.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> log2_w(-12, 6), log2_ratio(-14, -4);
  std::bernoulli_distribution sign;
  for (Format format : {Format::fp16, Format::bf16}) {
    const numerics::FormatInfo& f = numerics::format_info(format);
    for (int i = 0; i < 5000; ++i) {
      const double w = numerics::quantize(std::exp2(log2_w(rng)), f);
      if (std::exp2(std::floor(std::log2(w))) == w) continue;
      const double dw = (sign(rng) ? 1 : -1) * w * std::exp2(log2_ratio(rng));
      LostUpdates lost;
      const float wf = static_cast<float>(w);
      lost.add(std::span<const float>(&wf, 1), std::span<const double>(&dw, 1));
      const bool rule = (format == Format::fp16 ? lost.lost_fp16 : lost.lost_bf16) == 1;
      ASSERT_EQ(rule, numerics::quantize(w + dw, f) == w) << f.name << " w " << w << " dw " << dw;
    }
  }
}

}  // namespace
}  // namespace mixprec::numerics
