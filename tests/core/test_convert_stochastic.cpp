// Stochastic rounding f32 -> bf16 / f16: the exact rounding threshold, unbiasedness, fixed points,
// specials, and identical results whatever the ISA, thread count or split of the array.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/convert_test_util.h"
#include "mixprec/core/stochastic_rounding.h"
#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/core/random.h"

namespace mixprec {
namespace {

using test::convert_paths;
using test::ConvertPath;
using test::PathGuard;

constexpr std::uint64_t k2to32 = std::uint64_t{1} << 32;

/// P(up) is the dropped fraction f: the rule is "up iff r >= 2^32 - floor(f 2^32)". Check both
/// sides of that threshold for a value whose fraction f is computed here in double.
template <class Round>
void check_threshold(float x, double lower, double spacing, Round round, std::uint16_t down) {
  const double f = (static_cast<double>(x) - lower) / spacing;  // exact
  ASSERT_GT(f, 0.0);
  ASSERT_LT(f, 1.0);
  const auto threshold = static_cast<std::uint64_t>(k2to32 - std::floor(std::ldexp(f, 32)));
  ASSERT_LT(threshold, k2to32);
  EXPECT_EQ(round(x, static_cast<std::uint32_t>(threshold)), down + 1) << x;
  EXPECT_EQ(round(x, static_cast<std::uint32_t>(threshold - 1)), down) << x;
  EXPECT_EQ(round(x, 0u), down) << x;
  EXPECT_EQ(round(x, 0xffffffffu), down + 1) << x;
}

TEST(ConvertStochastic, RoundsUpExactlyAboveTheDocumentedThreshold) {
  const auto bf16 = [](float v, std::uint32_t r) { return f32_to_bf16_bits_stochastic(v, r); };
  const auto f16 = [](float v, std::uint32_t r) { return f32_to_f16_bits_stochastic(v, r); };
  check_threshold(1.0f + 0.3f * 0x1p-7f, 1.0, 0x1p-7, bf16, 0x3f80);
  check_threshold(std::bit_cast<float>(0x00012345u), 0x1p-133, 0x1p-133, bf16, 0x0001);
  check_threshold(1.0f + 0.3f * 0x1p-10f, 1.0, 0x1p-10, f16, 0x3c00);
  check_threshold(5.3f * 0x1p-24f, 5 * 0x1p-24, 0x1p-24, f16, 0x0005);     // subnormal f16
  check_threshold(0.3f * 0x1p-24f, 0.0, 0x1p-24, f16, 0x0000);             // below 2^-24
  check_threshold(1023.75f * 0x1p-24f, 1023 * 0x1p-24, 0x1p-24, f16, 0x03ff);  // up = min normal
  check_threshold(65519.0f, 65504.0, 32.0, f16, 0x7bff);                   // up = Inf
  check_threshold(-1.7f, -1.6953125, -0x1p-7, bf16, 0xbfd9);               // sign symmetric

  // Exact count over every 16-bit value of the random high half: ups == dropped bits d.
  const float x = std::bit_cast<float>(0x3f804ccdu);  // d = 0x4ccd
  int ups = 0;
  for (std::uint32_t k = 0; k < 65536; ++k) {
    ups += f32_to_bf16_bits_stochastic(x, k << 16) == 0x3f81;
  }
  EXPECT_EQ(ups, 0x4ccd);
}

TEST(ConvertStochastic, SpecialsAndRepresentableValuesAreFixed) {
  std::mt19937 gen(3);
  for (int trial = 0; trial < 64; ++trial) {
    const std::uint32_t r = trial == 0 ? 0u : trial == 1 ? 0xffffffffu : gen();
    // Every non-NaN f16 and bf16 value stays itself; NaNs become quiet as in RNE.
    for (std::uint32_t h = 0; h < 65536; ++h) {
      const auto bits = static_cast<std::uint16_t>(h);
      const float wf16 = f16_bits_to_f32(bits);
      const float wbf16 = bf16_bits_to_f32(bits);
      ASSERT_EQ(f32_to_f16_bits_stochastic(wf16, r), f32_to_f16_bits(wf16)) << std::hex << h;
      ASSERT_EQ(f32_to_bf16_bits_stochastic(wbf16, r), f32_to_bf16_bits(wbf16)) << std::hex << h;
    }
    EXPECT_EQ(f32_to_f16_bits_stochastic(70000.0f, r), 0x7c00);  // past the Inf position
    EXPECT_EQ(f32_to_f16_bits_stochastic(-1e30f, r), 0xfc00);
    EXPECT_EQ(f32_to_f16_bits_stochastic(std::bit_cast<float>(0x80000001u), r), 0x8000);
    EXPECT_EQ(f32_to_bf16_bits_stochastic(std::bit_cast<float>(0x7f800001u), r), 0x7fc0);
  }
  // Above bf16 max: truncation gives max, a carry gives Inf.
  EXPECT_EQ(f32_to_bf16_bits_stochastic(std::bit_cast<float>(0x7f7fffffu), 0u), 0x7f7f);
  EXPECT_EQ(f32_to_bf16_bits_stochastic(std::bit_cast<float>(0x7f7fffffu), 0xffffffffu), 0x7f80);
}

/// Mean of 1e6 stochastic roundings of x within 4 standard errors of x, and P(up) ~ f.
template <class T>
void check_unbiased(float x, double lower, double spacing) {
  constexpr std::size_t kN = 1000000;
  const std::vector<float> src(kN, x);
  std::vector<T> dst(kN);
  if constexpr (std::is_same_v<T, bfloat16>) {
    convert_f32_to_bf16_stochastic(src.data(), dst.data(), kN, /*seed=*/1234);
  } else {
    convert_f32_to_f16_stochastic(src.data(), dst.data(), kN, /*seed=*/1234);
  }
  double sum = 0;
  std::size_t ups = 0;
  for (const T& v : dst) {
    const double d = static_cast<float>(v);
    ASSERT_TRUE(d == lower || d == lower + spacing) << d;  // one of the two neighbours
    sum += d;
    ups += d != lower;
  }
  const double f = (static_cast<double>(x) - lower) / spacing;
  const double sd = spacing * std::sqrt(f * (1 - f));  // of one rounding
  EXPECT_NEAR(sum / kN, static_cast<double>(x), 4 * sd / std::sqrt(double(kN)));
  EXPECT_NEAR(static_cast<double>(ups) / kN, f, 4 * std::sqrt(f * (1 - f) / kN));
}

TEST(ConvertStochastic, IsUnbiased) {
  check_unbiased<bfloat16>(1.0f + 0.3f * 0x1p-7f, 1.0, 0x1p-7);
  check_unbiased<bfloat16>(std::bit_cast<float>(0x00012345u), 0x1p-133, 0x1p-133);
  check_unbiased<float16>(1.0f + 0.3f * 0x1p-10f, 1.0, 0x1p-10);
  check_unbiased<float16>(5.3f * 0x1p-24f, 5 * 0x1p-24, 0x1p-24);
  check_unbiased<float16>(0.3f * 0x1p-24f, 0.0, 0x1p-24);
}

TEST(ConvertStochastic, SameBitsOnEveryPathThreadCountAndSplit) {
  PathGuard guard;
  constexpr std::size_t kN = 200003;  // several parallel chunks and a ragged tail
  constexpr std::uint64_t kSeed = 0x5eed;
  std::mt19937 gen(11);
  std::vector<float> src(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    src[i] = i % 4 == 0 ? std::bit_cast<float>(static_cast<std::uint32_t>(gen()))
                        : std::ldexp(static_cast<float>(gen() % 100000), -int(gen() % 40));
  }
  for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{3}, std::uint64_t{1} << 40}) {
    // Reference: the scalar functions with random_bits straight from the definition.
    std::vector<std::uint16_t> want_bf16(kN), want_f16(kN);
    for (std::size_t i = 0; i < kN; ++i) {
      const std::uint32_t r = random_bits(kSeed, offset + i);
      want_bf16[i] = f32_to_bf16_bits_stochastic(src[i], r);
      want_f16[i] = f32_to_f16_bits_stochastic(src[i], r);
    }
    for (const ConvertPath& path : convert_paths()) {
      for (int threads : {1, 2}) {
        for (std::size_t split : {0u, 1u, 66u, 65537u}) {
          SCOPED_TRACE(::testing::Message() << path.label << " threads=" << threads << " split="
                                            << split << " offset=" << offset);
          guard.select(path);
          const int saved_threads = omp_get_max_threads();
          omp_set_num_threads(threads);
          std::vector<bfloat16> b(kN);
          std::vector<float16> h(kN);
          // [0, split) then [split, n) with offset + split: must equal one call.
          convert_f32_to_bf16_stochastic(src.data(), b.data(), split, kSeed, offset);
          convert_f32_to_bf16_stochastic(src.data() + split, b.data() + split, kN - split, kSeed,
                                         offset + split);
          convert_f32_to_f16_stochastic(src.data(), h.data(), split, kSeed, offset);
          convert_f32_to_f16_stochastic(src.data() + split, h.data() + split, kN - split, kSeed,
                                        offset + split);
          omp_set_num_threads(saved_threads);
          for (std::size_t i = 0; i < kN; ++i) {
            ASSERT_EQ(b[i].bits, want_bf16[i]) << "bf16 i=" << i;
            ASSERT_EQ(h[i].bits, want_f16[i]) << "f16 i=" << i;
          }
        }
      }
    }
  }
}

// Far below 2^-24 the dropped fraction needs more than 32 bits and the vector kernel shifts it
// right instead of left. Round-ups are rare there (P ~ 2^-7 .. 2^-10), so use many samples.
TEST(ConvertStochastic, F16FarBelowSpacingMatchesScalarAndRate) {
  PathGuard guard;
  constexpr std::size_t kPer = 250000;
  std::vector<float> src;
  std::vector<double> p_up;
  for (std::uint32_t exponent_field : {95u, 94u, 93u, 92u}) {  // s = 126 - e = 31 .. 34
    const float x = std::bit_cast<float>((exponent_field << 23) | 0x7fffffu);
    src.insert(src.end(), kPer, x);
    p_up.push_back(static_cast<double>(x) / 0x1p-24);  // fraction of a 2^-24 spacing
  }
  for (const ConvertPath& path : convert_paths()) {
    guard.select(path);
    std::vector<float16> h(src.size());
    convert_f32_to_f16_stochastic(src.data(), h.data(), src.size(), /*seed=*/9, /*offset=*/0);
    for (std::size_t block = 0; block < p_up.size(); ++block) {
      std::size_t ups = 0;
      for (std::size_t i = block * kPer; i < (block + 1) * kPer; ++i) {
        ASSERT_EQ(h[i].bits, f32_to_f16_bits_stochastic(src[i], random_bits(9, i)))
            << path.label << " i=" << i;
        ups += h[i].bits == 0x0001;
      }
      const double p = p_up[block];
      EXPECT_NEAR(static_cast<double>(ups) / kPer, p, 4 * std::sqrt(p * (1 - p) / kPer))
          << path.label << " block " << block;
    }
  }
}

// Every length around the vector widths, at every position within a Philox block (the vector
// loop starts at the next block boundary; the elements before it and the tail take the
// buffered path), with a sentinel after the end; the inputs mix specials, subnormals and
// values with random low bits.
TEST(ConvertStochastic, OddLengthsAndOffsetsOnEveryPath) {
  PathGuard guard;
  std::mt19937 gen(5);
  std::vector<float> src(80);
  const std::uint32_t specials[] = {0x7f800000u, 0xff800001u, 0x7fc00000u, 0x477fefffu,
                                    0x477ff000u, 0x33800001u, 0x00000001u, 0x80000000u};
  for (std::size_t i = 0; i < src.size(); ++i) {
    src[i] = std::bit_cast<float>(i < 8 ? specials[i] : static_cast<std::uint32_t>(gen()));
  }
  for (const ConvertPath& path : convert_paths()) {
    guard.select(path);
    for (std::uint64_t offset : {0u, 1u, 2u, 3u, 4u, 7u}) {
      for (std::size_t n = 0; n <= 70; ++n) {
        SCOPED_TRACE(::testing::Message() << path.label << " n=" << n << " offset=" << offset);
        std::vector<bfloat16> b(n + 1, bfloat16::from_bits(0xdead));
        std::vector<float16> h(n + 1, float16::from_bits(0xdead));
        convert_f32_to_bf16_stochastic(src.data(), b.data(), n, 42, offset);
        convert_f32_to_f16_stochastic(src.data(), h.data(), n, 42, offset);
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint32_t r = random_bits(42, offset + i);
          ASSERT_EQ(b[i].bits, f32_to_bf16_bits_stochastic(src[i], r)) << "bf16 i=" << i;
          ASSERT_EQ(h[i].bits, f32_to_f16_bits_stochastic(src[i], r)) << "f16 i=" << i;
        }
        ASSERT_EQ(b[n].bits, 0xdead) << "wrote past the end";
        ASSERT_EQ(h[n].bits, 0xdead) << "wrote past the end";
      }
    }
  }
}

TEST(ConvertStochastic, RejectsOffsetOverflow) {
  std::vector<float> src(4);
  std::vector<bfloat16> dst(4);
  EXPECT_THROW(convert_f32_to_bf16_stochastic(src.data(), dst.data(), 4, 1, ~std::uint64_t{0} - 2),
               ValueError);
  EXPECT_NO_THROW(
      convert_f32_to_bf16_stochastic(src.data(), dst.data(), 4, 1, ~std::uint64_t{0} - 4));
}

}  // namespace
}  // namespace mixprec
