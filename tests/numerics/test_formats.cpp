// The format table against the IEEE 754 / bfloat16 / OCP FP8 definitions, the quantiser bit-exact
// (exhaustive FP8 decode, every tie, and agreement with half.h over all 16-bit patterns), and the
// sweep and accumulation experiments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"
#include "mixprec/numerics/formats.h"
#include "numerics/quantize_detail.h"

namespace mixprec::numerics {
namespace {

double p2(int e) { return std::ldexp(1.0, e); }

const FormatInfo& fmt(Format f) { return format_info(f); }

void expect_row(Format f, int bits, int eb, int mb, int bias, bool has_inf, double max,
                double min_normal, double min_sub, double eps) {
  const FormatInfo& r = fmt(f);
  SCOPED_TRACE(r.name);
  EXPECT_EQ(r.format, f);
  EXPECT_EQ(r.bits, bits);
  EXPECT_EQ(r.exponent_bits, eb);
  EXPECT_EQ(r.mantissa_bits, mb);
  EXPECT_EQ(r.bias, bias);
  EXPECT_EQ(r.has_inf, has_inf);
  EXPECT_EQ(r.max, max);
  EXPECT_EQ(r.min_normal, min_normal);
  EXPECT_EQ(r.min_subnormal, min_sub);
  EXPECT_EQ(r.epsilon, eps);
  EXPECT_NEAR(r.decimal_digits, (mb + 1) * 0.30102999566398120, 1e-12);
}

TEST(NumericsFormatsTable, MatchesTheStandardDefinitions) {
  expect_row(Format::fp32, 32, 8, 23, 127, true, 3.4028234663852886e38, p2(-126), p2(-149),
             p2(-23));
  expect_row(Format::tf32, 19, 8, 10, 127, true, (2 - p2(-10)) * p2(127), p2(-126), p2(-136),
             p2(-10));
  expect_row(Format::fp16, 16, 5, 10, 15, true, 65504, p2(-14), p2(-24), p2(-10));
  expect_row(Format::bf16, 16, 8, 7, 127, true, 3.3895313892515355e38, p2(-126), p2(-133), p2(-7));
  expect_row(Format::fp8_e4m3, 8, 4, 3, 7, false, 448, p2(-6), p2(-9), p2(-3));
  expect_row(Format::fp8_e5m2, 8, 5, 2, 15, true, 57344, p2(-14), p2(-16), p2(-2));
  EXPECT_NEAR(fmt(Format::fp32).decimal_digits, 7.22, 0.01);
  EXPECT_NEAR(fmt(Format::fp16).decimal_digits, 3.31, 0.01);
  EXPECT_NEAR(fmt(Format::bf16).decimal_digits, 2.41, 0.01);
  EXPECT_EQ(unit_roundoff(fmt(Format::fp16)), p2(-11));
}

TEST(NumericsFormatsTable, AgreesWithTheDTypeTable) {
  const std::pair<Format, DType> pairs[] = {
      {Format::fp32, DType::f32}, {Format::bf16, DType::bf16}, {Format::fp16, DType::f16}};
  for (const auto& [f, d] : pairs) {
    SCOPED_TRACE(fmt(f).name);
    EXPECT_EQ(fmt(f).max, traits(d).max);
    EXPECT_EQ(fmt(f).min_normal, traits(d).min_normal);
    EXPECT_EQ(fmt(f).min_subnormal, traits(d).min_subnormal);
    EXPECT_EQ(fmt(f).epsilon, traits(d).epsilon);
    EXPECT_EQ(fmt(f).mantissa_bits, traits(d).mantissa_bits);
  }
}

TEST(NumericsFormatsTable, ParsesNames) {
  for (const FormatInfo& f : all_formats()) EXPECT_EQ(parse_format(f.name).format, f.format);
  EXPECT_EQ(parse_format("e4m3").format, Format::fp8_e4m3);
  EXPECT_EQ(parse_format("f16").format, Format::fp16);
  EXPECT_THROW(parse_format("fp4"), ValueError);
}

// Independent decoders written from the OCP FP8 specification.
double spec_e4m3(int b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double v = e == 0 ? m * p2(-9) : (8 + m) * p2(e - 10);
  return s ? -v : v;
}
double spec_e5m2(int b) {
  const int s = b >> 7, e = (b >> 2) & 31, m = b & 3;
  double v = 0;
  if (e == 31) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = e == 0 ? m * p2(-16) : (4 + m) * p2(e - 17);
  }
  return s ? -v : v;
}

TEST(NumericsFormatsFp8, ExhaustiveDecodeAndRoundTrip) {
  int e4m3_nans = 0, e5m2_nans = 0;
  for (int b = 0; b < 256; ++b) {
    SCOPED_TRACE(b);
    const auto bits = static_cast<std::uint8_t>(b);
    const double v4 = decode_e4m3(bits), v5 = decode_e5m2(bits);
    if (std::isnan(spec_e4m3(b))) {
      EXPECT_TRUE(std::isnan(v4));
      ++e4m3_nans;
    } else {
      EXPECT_EQ(v4, spec_e4m3(b));
      EXPECT_EQ(std::signbit(v4), b >= 128);
      EXPECT_EQ(encode_e4m3(v4), bits);  // every finite pattern is its own value's encoding
    }
    if (std::isnan(spec_e5m2(b))) {
      EXPECT_TRUE(std::isnan(v5));
      ++e5m2_nans;
    } else {
      EXPECT_EQ(v5, spec_e5m2(b));
      EXPECT_EQ(encode_e5m2(v5), bits);
    }
  }
  EXPECT_EQ(e4m3_nans, 2);  // S.1111.111 only
  EXPECT_EQ(e5m2_nans, 6);  // S.11111.{01,10,11}
  EXPECT_EQ(decode_e4m3(0x7E), 448);
  EXPECT_EQ(decode_e5m2(0x7B), 57344);
  EXPECT_EQ(decode_e4m3(0x01), p2(-9));
  EXPECT_EQ(decode_e5m2(0x01), p2(-16));
}

// Every pair of adjacent non-negative values (patterns b, b+1): the midpoint goes to the even
// pattern, anything off the midpoint to the nearer neighbour. Covers zero/subnormal/normal ties.
void check_adjacent_ties(Format f, int last_finite) {
  const FormatInfo& info = fmt(f);
  for (int b = 0; b < last_finite; ++b) {
    SCOPED_TRACE(b);
    const double lo = decode_bits(static_cast<std::uint32_t>(b), info);
    const double hi = decode_bits(static_cast<std::uint32_t>(b + 1), info);
    const double mid = (lo + hi) / 2;
    const auto even = static_cast<std::uint32_t>((b & 1) == 0 ? b : b + 1);
    EXPECT_EQ(encode_bits(mid, info), even);
    EXPECT_EQ(encode_bits(std::nextafter(mid, 0.0), info), static_cast<std::uint32_t>(b));
    EXPECT_EQ(encode_bits(std::nextafter(mid, 1e300), info), static_cast<std::uint32_t>(b + 1));
    EXPECT_EQ(encode_bits(-mid, info), even | (1u << (info.bits - 1)));
  }
}

TEST(NumericsFormatsFp8, TiesGoToEvenIncludingSubnormals) {
  check_adjacent_ties(Format::fp8_e4m3, 0x7E);
  check_adjacent_ties(Format::fp8_e5m2, 0x7B);
  EXPECT_EQ(encode_e4m3(p2(-10)), 0x00);  // half the smallest subnormal: tie to zero
  EXPECT_EQ(encode_e4m3(p2(-10) * 1.0001), 0x01);
  EXPECT_EQ(encode_e4m3(3 * p2(-10)), 0x02);  // 1.5 subnormals: tie to the even 2
  EXPECT_EQ(encode_e5m2(p2(-17)), 0x00);
  EXPECT_TRUE(std::signbit(quantize(-1e-30, fmt(Format::fp8_e5m2))));  // a signed zero
  EXPECT_EQ(encode_e5m2(-1e-30), 0x80);
}

TEST(NumericsFormatsFp8, OverflowGivesNaNForE4M3AndInfForE5M2) {
  // E4M3: 464 is the tie between 448 (mantissa 110) and the NaN slot's 480; ties to even keep
  // 448, anything above overflows to NaN (OCP's non-saturating mode).
  EXPECT_EQ(encode_e4m3(464), 0x7E);
  EXPECT_EQ(encode_e4m3(std::nextafter(464.0, 1e9)), 0x7F);
  EXPECT_EQ(encode_e4m3(1e9), 0x7F);
  EXPECT_EQ(encode_e4m3(-1e9), 0xFF);
  EXPECT_EQ(encode_e4m3(INFINITY), 0x7F);
  EXPECT_TRUE(std::isnan(quantize(500, fmt(Format::fp8_e4m3))));
  EXPECT_EQ(quantize(460, fmt(Format::fp8_e4m3)), 448);
  // E5M2: 61440 is the tie between 57344 (odd mantissa) and 2^16 (even): it goes to Inf.
  EXPECT_EQ(encode_e5m2(61440), 0x7C);
  EXPECT_EQ(encode_e5m2(std::nextafter(61440.0, 0.0)), 0x7B);
  EXPECT_EQ(encode_e5m2(-INFINITY), 0xFC);
  EXPECT_EQ(encode_e5m2(NAN), 0x7E);
  EXPECT_EQ(encode_e4m3(NAN), 0x7F);
  EXPECT_EQ(quantize(-1e6, fmt(Format::fp8_e5m2)), -INFINITY);
}

// quantize/encode_bits against half.h over every finite 16-bit value, the midpoints between
// neighbours, and the floats just either side of each midpoint (all exact in float).
template <class ToBits, class FromBits>
void check_against_half_h(Format f, std::uint32_t max_pattern, double top_next, ToBits to_bits,
                          FromBits from_bits) {
  const FormatInfo& info = fmt(f);
  int checked = 0;
  for (std::uint32_t b = 0; b <= max_pattern; ++b) {
    const double lo = from_bits(static_cast<std::uint16_t>(b));
    const double hi = b < max_pattern
                          ? static_cast<double>(from_bits(static_cast<std::uint16_t>(b + 1)))
                          : top_next;
    const auto mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    for (float sign : {1.0f, -1.0f}) {
      for (float x : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f),
                      std::nextafter(mid, INFINITY)}) {
        x *= sign;
        const std::uint16_t want = to_bits(x);
        if (encode_bits(x, info) != want ||
            quantize(x, info) != static_cast<double>(from_bits(want))) {
          ADD_FAILURE() << info.name << ": x=" << x << " half.h bits " << want << " ours "
                        << encode_bits(x, info);
          return;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(max_pattern + 1) * 8);
}

TEST(NumericsFormatsHalf, Fp16AndBf16MatchHalfHOnAllPatternsAndMidpoints) {
  check_against_half_h(Format::fp16, 0x7BFF, 65536.0, f32_to_f16_bits, f16_bits_to_f32);
  check_against_half_h(Format::bf16, 0x7F7F, std::ldexp(1.0, 128), f32_to_bf16_bits,
                       bf16_bits_to_f32);
  EXPECT_EQ(encode_bits(NAN, fmt(Format::fp16)), 0x7E00u);
  EXPECT_EQ(encode_bits(-NAN, fmt(Format::bf16)), 0xFFC0u);
}

TEST(NumericsFormatsHalf, Fp32MatchesTheHardwareConversionAndTf32RoundsAt10Bits) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> exponent(-160, 130);
  const FormatInfo& f32 = fmt(Format::fp32);
  for (int i = 0; i < 100000; ++i) {
    const double x = std::exp2(exponent(rng)) * (i % 2 ? -1 : 1);
    ASSERT_EQ(quantize(x, f32), static_cast<double>(static_cast<float>(x))) << x;
  }
  const FormatInfo& tf32 = fmt(Format::tf32);
  EXPECT_EQ(quantize(1 + p2(-11), tf32), 1.0);             // tie to the even 1
  EXPECT_EQ(quantize(1 + 3 * p2(-11), tf32), 1 + p2(-9));  // tie to the even 1 + 2^-9
  EXPECT_EQ(quantize(1 + p2(-11) + p2(-30), tf32), 1 + p2(-10));
  EXPECT_EQ(encode_bits(1.0, tf32), 0x3F800000u >> 13);  // fp32's top 19 bits
  EXPECT_EQ(quantize(1e39, tf32), INFINITY);
}

// The accumulator's add must round the exact sum once: a double sum that lands on a tie of the
// format after losing a far-away bit would otherwise be rounded a second time, the wrong way.
TEST(NumericsFormatsAccumulation, SumIsRoundedOnceWithoutDoubleRounding) {
  const FormatInfo& f32 = fmt(Format::fp32);
  EXPECT_EQ(detail::quantize_sum(1.0, p2(-24), f32), 1.0);  // an exact tie: to even
  EXPECT_EQ(detail::quantize_sum(1.0, p2(-24) + p2(-70), f32), 1 + p2(-23));
  EXPECT_EQ(detail::quantize_sum(1 + p2(-23), p2(-24) - p2(-70), f32), 1 + p2(-23));
  EXPECT_EQ(detail::quantize_sum(1 + p2(-23), p2(-24), f32), 1 + p2(-22));
  EXPECT_EQ(detail::quantize_sum(-1.0, -p2(-24) - p2(-70), f32), -1 - p2(-23));
}

TEST(NumericsFormatsSweep, Fp16OverflowsAt1e5AndFlushesAt1e8) {
  const std::vector<DecadeError> sweep =
      representation_error_sweep(fmt(Format::fp16), -12, 12, 1000);
  ASSERT_EQ(sweep.size(), 24u);
  const auto at = [&](int e) { return sweep[static_cast<std::size_t>(e + 12)]; };
  EXPECT_EQ(at(5).overflow_fraction, 1.0);
  EXPECT_EQ(at(5).max_rel_error, INFINITY);
  EXPECT_GT(at(4).overflow_fraction, 0.0);  // 65520 .. 1e5 overflows
  EXPECT_LT(at(4).overflow_fraction, 1.0);
  EXPECT_GT(at(-8).zero_fraction, 0.0);  // below 2^-25 ~ 2.98e-8 flushes to zero
  EXPECT_LT(at(-8).zero_fraction, 1.0);
  EXPECT_EQ(at(-9).zero_fraction, 1.0);
  EXPECT_EQ(at(-9).max_rel_error, 1.0);
  EXPECT_EQ(at(-6).subnormal_fraction, 1.0);  // [1e-6, 1e-5) is below 2^-14 ~ 6.1e-5
  EXPECT_GT(at(-6).max_rel_error, 10 * p2(-11));
  // Normal range: the error is at most the unit roundoff and, with 1000 samples, close to it.
  EXPECT_LE(at(0).max_rel_error, p2(-11));
  EXPECT_GT(at(0).max_rel_error, 0.9 * p2(-11));
  EXPECT_EQ(at(0).subnormal_fraction + at(0).zero_fraction + at(0).overflow_fraction, 0.0);
  EXPECT_GT(at(0).mean_rel_error, 0.0);
  EXPECT_LT(at(0).mean_rel_error, at(0).max_rel_error);
}

TEST(NumericsFormatsSweep, OtherFormatsAndArgumentChecks) {
  for (const DecadeError& d : representation_error_sweep(fmt(Format::bf16))) {
    EXPECT_EQ(d.overflow_fraction + d.zero_fraction + d.subnormal_fraction, 0.0);
    EXPECT_LE(d.max_rel_error, p2(-8));
  }
  const std::vector<DecadeError> e4m3 =
      representation_error_sweep(fmt(Format::fp8_e4m3), 2, 4, 100);
  EXPECT_GT(e4m3[0].overflow_fraction, 0.0);  // 448 lies in [1e2, 1e3)
  EXPECT_EQ(e4m3[1].overflow_fraction, 1.0);
  EXPECT_THROW(representation_error_sweep(fmt(Format::fp16), 3, 3), ValueError);
  EXPECT_THROW(representation_error_sweep(fmt(Format::fp16), -301, 0), ValueError);
  EXPECT_THROW(representation_error_sweep(fmt(Format::fp16), 0, 1, 0), ValueError);
}

TEST(NumericsFormatsAccumulation, Fp16AccumulatorLosesToFp32AndFp32StaysBelowGamma) {
  const FormatInfo& in = fmt(Format::fp16);
  for (int n : {10, 100, 1000, 10000, 100000, 1000000}) {
    SCOPED_TRACE(n);
    const AccumulationResult r32 = accumulation_experiment(n, in, fmt(Format::fp32), 7);
    ASSERT_TRUE(r32.gamma_defined);
    EXPECT_LE(r32.rel_error, r32.gamma_n);
    EXPECT_NEAR(r32.exact, n / 4.0, 0.5 * n / 4.0 + 1);  // E[ab] = 1/4 for a, b ~ U[0, 1)
  }
  const AccumulationResult r16 = accumulation_experiment(10000, in, fmt(Format::fp16), 7);
  const AccumulationResult r32 = accumulation_experiment(10000, in, fmt(Format::fp32), 7);
  EXPECT_EQ(r16.exact, r32.exact);  // the same inputs for every accumulator
  EXPECT_GT(r16.rel_error, 100 * r32.rel_error);
  // The fp16 sum stagnates once its spacing (2 above 2048) exceeds twice a product (< 1).
  EXPECT_LT(r16.computed, 4096);
  EXPECT_FALSE(r16.gamma_defined);  // n u = 10^4 * 2^-11 >= 1
  EXPECT_EQ(r16.gamma_n, INFINITY);
  const AccumulationResult small = accumulation_experiment(10, in, fmt(Format::fp16), 7);
  ASSERT_TRUE(small.gamma_defined);
  EXPECT_LE(small.rel_error, small.gamma_n);
  EXPECT_THROW(accumulation_experiment(0, in, in, 1), ValueError);
}

TEST(NumericsFormatsAccumulation, IsDeterministicAndGeometricSizesAreRight) {
  const AccumulationResult a =
      accumulation_experiment(5000, fmt(Format::bf16), fmt(Format::bf16), 3);
  const AccumulationResult b =
      accumulation_experiment(5000, fmt(Format::bf16), fmt(Format::bf16), 3);
  EXPECT_EQ(a.computed, b.computed);
  EXPECT_EQ(a.input, Format::bf16);
  EXPECT_EQ(geometric_sizes(10, 1000000, 1),
            (std::vector<int>{10, 100, 1000, 10000, 100000, 1000000}));
  EXPECT_EQ(geometric_sizes(10, 100, 2), (std::vector<int>{10, 32, 100}));
  EXPECT_EQ(geometric_sizes(5, 5, 3), (std::vector<int>{5}));
  EXPECT_THROW(geometric_sizes(0, 10, 1), ValueError);
}

}  // namespace
}  // namespace mixprec::numerics
