// The fused fp8 cast-transpose (kernels/fp8_scale.h) against an independent composition: the
// reference's fp8_scaled_cast of the whole matrix, then a plain transpose of its bytes. On odd
// shapes (single elements, partial tiles, a tile multiple, empty rows or columns, a threaded
// size), with y and with y null, from f32, bf16 and f16 holding NaN, Inf, saturating values,
// signed zeros and subnormals, into both formats: the reference and the cpu backend on every ISA
// this CPU has write the same y and yt bytes and the same amax as the composition, and touch
// nothing past them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::uint8_t kUntouched = 0xAA;

/// rows x cols values over many binades (2^-24 to 2^24, both signs), with every few elements a
/// special one: NaN, Inf, values that saturate at the scale used, signed zeros, f32 subnormals.
/// `specials` false leaves only finite values, so the amax is a number.
std::vector<float> values(std::int64_t n, std::uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f), expo(-24.0f, 24.0f);
  const float special[] = {kNaN, -kNaN, kInf, -kInf, 1e6f, -3e5f, 0.0f, -0.0f, 1e-40f, 61440.0f};
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = std::ldexp(mant(rng), static_cast<int>(expo(rng)));
    x[static_cast<std::size_t>(i)] = (rng() & 1) != 0 ? v : -v;
    if (specials && rng() % 23 == 0) x[static_cast<std::size_t>(i)] = special[rng() % std::size(special)];
  }
  return x;
}

/// The input in dtype t, as raw bytes (bf16 and f16 rounded once from the f32 values).
std::vector<std::uint8_t> encode(const std::vector<float>& x, DType t) {
  std::vector<std::uint8_t> out(x.size() * size_of(t));
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(out.data() + 4 * i, &x[i], 4);
      continue;
    }
    const std::uint16_t b = t == DType::bf16 ? f32_to_bf16_bits(x[i]) : f32_to_f16_bits(x[i]);
    std::memcpy(out.data() + 2 * i, &b, 2);
  }
  return out;
}

struct CastTransposed {
  std::vector<std::uint8_t> y, yt;  // one sentinel byte past the end of each
  std::uint32_t amax_bits = 0;
};

/// The composition the fused kernel replaces: the reference's fp8_scaled_cast, then the bytes
/// transposed by a plain loop.
CastTransposed composed(const std::vector<std::uint8_t>& x, DType t, std::int64_t rows,
                        std::int64_t cols, DType fmt, float scale) {
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  CastTransposed c{std::vector<std::uint8_t>(n + 1, kUntouched), std::vector<std::uint8_t>(n + 1, kUntouched)};
  float amax = -1.0f;
  ref_backend().fp8_scaled_cast(x.data(), t, c.y.data(), fmt, rows * cols, &scale, &amax);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < cols; ++k) {
      c.yt[static_cast<std::size_t>(k * rows + r)] = c.y[static_cast<std::size_t>(r * cols + k)];
    }
  }
  c.amax_bits = std::bit_cast<std::uint32_t>(amax);
  return c;
}

/// The fused kernel of backend b; y null when with_y is false (its bytes then stay untouched).
CastTransposed fused(const Backend& b, const std::vector<std::uint8_t>& x, DType t,
                     std::int64_t rows, std::int64_t cols, DType fmt, float scale, bool with_y) {
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  CastTransposed c{std::vector<std::uint8_t>(n + 1, kUntouched), std::vector<std::uint8_t>(n + 1, kUntouched)};
  float amax = -1.0f;  // set, not raised: -1 must not survive
  b.fp8_scaled_cast_transpose(x.data(), t, rows, cols, with_y ? c.y.data() : nullptr, c.yt.data(),
                              fmt, &scale, &amax);
  c.amax_bits = std::bit_cast<std::uint32_t>(amax);
  return c;
}

void expect_same(const CastTransposed& got, const CastTransposed& want, bool with_y,
                 const std::string& what) {
  if (with_y) {
    ASSERT_EQ(got.y, want.y) << what << ": y";
  } else {
    ASSERT_EQ(got.y, std::vector<std::uint8_t>(want.y.size(), kUntouched)) << what << ": y null";
  }
  ASSERT_EQ(got.yt, want.yt) << what << ": yt";
  EXPECT_EQ(got.amax_bits, want.amax_bits) << what << ": amax";
}

struct Shape2 {
  std::int64_t rows, cols;
};

// 1x1, partial tiles both ways, a multiple of the cpu tile (64 x 128) and of CUDA's (32 x 32),
// empty rows or columns, and one above the parallel threshold with partial edge tiles.
constexpr Shape2 kShapes[] = {{1, 1}, {3, 257}, {130, 67}, {128, 256}, {0, 5}, {5, 0}, {300, 257}};

class Fp8CastTranspose : public ::testing::TestWithParam<DType> {};

TEST_P(Fp8CastTranspose, MatchesTheCastThenATransposeOnEveryIsa) {
  const DType fmt = GetParam();
  std::uint32_t seed = 1;
  for (const Shape2& s : kShapes) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      for (bool specials : {false, true}) {
        const std::vector<std::uint8_t> x = encode(values(s.rows * s.cols, seed++, specials), t);
        // two scales; at either the largest inputs saturate and the smallest flush to zero
        const float scale = specials ? 64.0f : 0.125f;
        const CastTransposed want = composed(x, t, s.rows, s.cols, fmt, scale);
        const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " +
                                 name(t) + "->" + name(fmt) + (specials ? " specials" : "");
        for (bool with_y : {true, false}) {
          const std::string how = what + (with_y ? "" : " (y null)");
          expect_same(fused(ref_backend(), x, t, s.rows, s.cols, fmt, scale, with_y), want, with_y,
                      how + " ref");
          for (Isa isa : ktest::isas_to_test()) {
            ktest::IsaCap cap(isa);
            expect_same(fused(cpu_backend(), x, t, s.rows, s.cols, fmt, scale, with_y), want,
                        with_y, how + " cpu " + name(isa));
          }
        }
      }
    }
  }
}

// The amax follows fp8_scaled_cast's rules: exact max |x| of finite inputs, Inf over finite
// ones, NaN over everything, 0 for no element; set, not raised.
TEST_P(Fp8CastTranspose, AmaxPropagatesInfAndNaN) {
  const DType fmt = GetParam();
  const std::int64_t rows = 300, cols = 257;
  std::vector<float> x = values(rows * cols, 99, false);
  float finite = 0.0f;
  for (float v : x) finite = std::fmax(finite, std::fabs(v));
  for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
    std::vector<float> v = x;
    EXPECT_EQ(fused(*b, encode(v, DType::f32), DType::f32, rows, cols, fmt, 1.0f, true).amax_bits,
              std::bit_cast<std::uint32_t>(finite)) << b->name;
    v[static_cast<std::size_t>(rows * cols - 1)] = -kInf;
    EXPECT_EQ(fused(*b, encode(v, DType::f32), DType::f32, rows, cols, fmt, 1.0f, false).amax_bits,
              std::bit_cast<std::uint32_t>(kInf)) << b->name;
    v[7] = -kNaN;
    const float got = std::bit_cast<float>(
        fused(*b, encode(v, DType::f32), DType::f32, rows, cols, fmt, 1.0f, true).amax_bits);
    EXPECT_TRUE(std::isnan(got)) << b->name;
    EXPECT_EQ(fused(*b, {}, DType::f32, 0, cols, fmt, 1.0f, true).amax_bits, 0u) << b->name;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8CastTranspose, ::testing::Values(DType::f8e4m3, DType::f8e5m2),
                         [](const auto& p) { return std::string(name(p.param)); });

TEST(Fp8CastTransposeErrors, RefusesBadArguments) {
  float x = 1.0f, s = 1.0f, a = 0.0f;
  std::uint8_t y = 0, yt = 0;
  for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
    EXPECT_THROW(b->fp8_scaled_cast_transpose(&x, DType::f32, 1, 1, &y, &yt, DType::bf16, &s, &a),
                 DTypeError);
    EXPECT_THROW(b->fp8_scaled_cast_transpose(&y, DType::f8e4m3, 1, 1, &y, &yt, DType::f8e4m3, &s, &a),
                 DTypeError);
    EXPECT_THROW(b->fp8_scaled_cast_transpose(&x, DType::f32, -1, 1, &y, &yt, DType::f8e4m3, &s, &a),
                 ShapeError);
    EXPECT_THROW(b->fp8_scaled_cast_transpose(&x, DType::f32, 1, -1, &y, &yt, DType::f8e4m3, &s, &a),
                 ShapeError);
    EXPECT_THROW(b->fp8_scaled_cast_transpose(&x, DType::f32, 1, 1, &y, nullptr, DType::f8e4m3, &s, &a),
                 ValueError);
    EXPECT_THROW(b->fp8_scaled_cast_transpose(&x, DType::f32, 1, 1, &y, &yt, DType::f8e4m3, nullptr, &a),
                 ValueError);
  }
}

}  // namespace
}  // namespace mixprec::kernels
