// The fp8 GEMM (kernels/fp8_gemm.h) against an independent oracle: operands decoded by
// numerics/formats.h's double decoder and divided by their scales, products and sums in double.
// The reference must match it within f32 summation; where every partial sum is exact in f32 it
// must match it bit for bit, and the cpu kernel (oneDNN's f32 GEMM over decoded copies) must
// equal the reference bit for bit there too. The scales divide the result exactly, a 16-bit C
// is rounded once, NaN propagates, k = 0 gives zeros, and bad arguments throw before C is
// touched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"
#include "mixprec/numerics/formats.h"

namespace mixprec::kernels {
namespace {

const numerics::FormatInfo& fmt_info(DType fmt) {
  return numerics::format_info(fmt == DType::f8e4m3 ? numerics::Format::fp8_e4m3
                                                    : numerics::Format::fp8_e5m2);
}

/// n random finite fp8 bytes of fmt whose magnitude is at most 2^max_exp (exponent field
/// limited, so sums of their products can be kept exact in f32).
std::vector<std::uint8_t> random_fp8(DType fmt, std::int64_t n, int max_exp, std::uint32_t seed) {
  const numerics::FormatInfo& f = fmt_info(fmt);
  std::mt19937 gen(seed);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n));
  for (auto& b : out) {
    for (;;) {
      const auto bits = static_cast<std::uint8_t>(gen() & 0xff);
      const double v = numerics::decode_bits(bits, f);
      if (std::isfinite(v) && std::fabs(v) <= std::ldexp(1.0, max_exp)) {
        b = bits;
        break;
      }
    }
  }
  return out;
}

/// C in double: sum_p (decode(a) / sa) (decode(b) / sb).
std::vector<double> oracle(const Fp8GemmDesc& d, const std::vector<std::uint8_t>& a, float sa,
                           const std::vector<std::uint8_t>& b, float sb) {
  std::vector<double> c(static_cast<std::size_t>(d.m * d.n), 0.0);
  for (std::int64_t i = 0; i < d.m; ++i) {
    for (std::int64_t j = 0; j < d.n; ++j) {
      double acc = 0.0;
      for (std::int64_t p = 0; p < d.k; ++p) {
        acc += numerics::decode_bits(a[static_cast<std::size_t>(i * d.k + p)], fmt_info(d.a_dtype)) / sa *
               (numerics::decode_bits(b[static_cast<std::size_t>(j * d.k + p)], fmt_info(d.b_dtype)) / sb);
      }
      c[static_cast<std::size_t>(i * d.n + j)] = acc;
    }
  }
  return c;
}

/// Bytes with the sign cleared: the oracle of these is sum |terms|, which bounds the error of an
/// f32 sum of them ((k - 1) u sum |terms| for any order, u = 2^-24).
std::vector<std::uint8_t> magnitudes(const std::vector<std::uint8_t>& v) {
  std::vector<std::uint8_t> out(v);
  for (auto& b : out) b &= 0x7f;
  return out;
}

struct Problem {
  Fp8GemmDesc d;
  std::vector<std::uint8_t> a, b;
  float scales[2];
};

Problem make(DType fa, DType fb, std::int64_t m, std::int64_t n, std::int64_t k, int max_exp,
             float sa, float sb) {
  Problem p;
  p.d.m = m, p.d.n = n, p.d.k = k, p.d.a_dtype = fa, p.d.b_dtype = fb;
  p.a = random_fp8(fa, m * k, max_exp, 1);
  p.b = random_fp8(fb, n * k, max_exp, 2);
  p.scales[0] = sa, p.scales[1] = sb;
  return p;
}

std::vector<float> run(const decltype(&ref::fp8_gemm) kernel, const Problem& p) {
  std::vector<float> c(static_cast<std::size_t>(p.d.m * p.d.n), -1.0f);
  kernel(p.d, p.a.data(), &p.scales[0], p.b.data(), &p.scales[1], nullptr, c.data());
  return c;
}

class Fp8GemmFormats : public ::testing::TestWithParam<std::pair<DType, DType>> {};

TEST_P(Fp8GemmFormats, ReferenceMatchesTheDoubleOracle) {
  const auto [fa, fb] = GetParam();
  const Problem p = make(fa, fb, 13, 21, 70, 8, 16.0f, 0.125f);
  const std::vector<float> got = run(&ref::fp8_gemm, p);
  const std::vector<double> want = oracle(p.d, p.a, p.scales[0], p.b, p.scales[1]);
  const std::vector<double> abs_sum =
      oracle(p.d, magnitudes(p.a), p.scales[0], magnitudes(p.b), p.scales[1]);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 70.0 * std::ldexp(abs_sum[i], -24)) << i;
  }
}

TEST_P(Fp8GemmFormats, ExactSumsAreTheOracleBitForBitOnRefAndCpu) {
  const auto [fa, fb] = GetParam();
  // Operands in [0.25, 8] (smaller ones zeroed), divided by 2 and 4: multiples of 2^-6, so
  // every product is a multiple of 2^-12 and every partial sum of 40 a multiple of 2^-12 below
  // 40 * 4 * 2 < 2^9: 21 bits, exact in f32 in any order.
  Problem p = make(fa, fb, 9, 16, 40, 3, 2.0f, 4.0f);
  for (auto* v : {&p.a, &p.b}) {
    const DType f = v == &p.a ? fa : fb;
    for (auto& bits : *v) {  // drop subnormals and tiny values: keep the sums within 24 bits
      if (std::fabs(numerics::decode_bits(bits, fmt_info(f))) < 0.25) bits = 0;
    }
  }
  const std::vector<double> want = oracle(p.d, p.a, p.scales[0], p.b, p.scales[1]);
  const std::vector<float> ref_c = run(&ref::fp8_gemm, p);
  const std::vector<float> cpu_c = run(&cpu::fp8_gemm, p);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(ref_c[i], static_cast<float>(want[i])) << i;
    EXPECT_EQ(cpu_c[i], ref_c[i]) << i;
    ASSERT_EQ(static_cast<double>(ref_c[i]), want[i]) << i << ": the sum was meant to be exact";
  }
}

TEST_P(Fp8GemmFormats, CpuMatchesTheReferenceAtThreadedSizes) {
  const auto [fa, fb] = GetParam();
  const Problem p = make(fa, fb, 130, 96, 512, 10, 64.0f, 0.5f);
  const std::vector<float> ref_c = run(&ref::fp8_gemm, p);
  const std::vector<float> cpu_c = run(&cpu::fp8_gemm, p);
  const std::vector<double> abs_sum =
      oracle(p.d, magnitudes(p.a), p.scales[0], magnitudes(p.b), p.scales[1]);
  for (std::size_t i = 0; i < ref_c.size(); ++i) {
    // two f32 summation orders, each within (k - 1) u sum |terms| of the exact sum
    EXPECT_NEAR(cpu_c[i], ref_c[i], 2.0 * 512.0 * std::ldexp(abs_sum[i], -24)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, Fp8GemmFormats,
                         ::testing::Values(std::pair{DType::f8e4m3, DType::f8e4m3},
                                           std::pair{DType::f8e5m2, DType::f8e4m3},
                                           std::pair{DType::f8e4m3, DType::f8e5m2}));

TEST(Fp8Gemm, ScalesDivideTheResultExactly) {
  Problem p = make(DType::f8e4m3, DType::f8e4m3, 7, 9, 33, 6, 1.0f, 1.0f);
  const std::vector<float> unit = run(&ref::fp8_gemm, p);
  p.scales[0] = 32.0f, p.scales[1] = 0.125f;  // divides by 4
  const std::vector<float> scaled = run(&ref::fp8_gemm, p);
  const std::vector<float> cpu_scaled = run(&cpu::fp8_gemm, p);
  for (std::size_t i = 0; i < unit.size(); ++i) {
    EXPECT_EQ(scaled[i], unit[i] / 4.0f) << i;
    EXPECT_EQ(cpu_scaled[i], unit[i] / 4.0f) << i;
  }
}

TEST(Fp8Gemm, SixteenBitOutputIsTheF32ResultRoundedOnce) {
  Problem p = make(DType::f8e4m3, DType::f8e5m2, 11, 8, 48, 7, 4.0f, 2.0f);
  for (auto kernel : {&ref::fp8_gemm, &cpu::fp8_gemm}) {
    // each kernel against its own f32 result (ref and cpu sum in different orders)
    p.d.c_dtype = DType::f32;
    const std::vector<float> f32 = run(kernel, p);
    for (DType t : {DType::bf16, DType::f16}) {
      p.d.c_dtype = t;
      std::vector<std::uint16_t> c(f32.size());
      kernel(p.d, p.a.data(), &p.scales[0], p.b.data(), &p.scales[1], nullptr, c.data());
      for (std::size_t i = 0; i < c.size(); ++i) {
        const std::uint16_t want = t == DType::bf16 ? f32_to_bf16_bits(f32[i]) : f32_to_f16_bits(f32[i]);
        EXPECT_EQ(c[i], want) << name(t) << " " << i;
      }
    }
  }
}

// A bias joins the f32 sums before C's one rounding: C with the bias is round_c(f32 C without
// it + bias[j]) bit for bit, in every C dtype and bias dtype, on ref and cpu; with k = 0 it is
// the bias itself.
TEST(Fp8Gemm, BiasIsAddedToTheF32SumsBeforeTheOneRounding) {
  Problem p = make(DType::f8e4m3, DType::f8e4m3, 9, 13, 32, 6, 2.0f, 8.0f);
  const std::vector<float> bias_values = {0.5f,   -3.25f, 1e-3f, 7.0f,  -0.0f, 100.5f, 0.1f,
                                          -1.5f,  2.0f,   3e4f,  -7e-5f, 0.75f, -9.0f};
  for (auto kernel : {&ref::fp8_gemm, &cpu::fp8_gemm}) {
    p.d.has_bias = false;
    p.d.c_dtype = DType::f32;
    const std::vector<float> plain = run(kernel, p);
    for (DType bias_dtype : {DType::f32, DType::bf16, DType::f16}) {
      ktest::Buffer bias(bias_dtype, 13);
      for (std::int64_t j = 0; j < 13; ++j) bias.set(j, bias_values[static_cast<std::size_t>(j)]);
      p.d.has_bias = true;
      p.d.bias_dtype = bias_dtype;
      for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        p.d.c_dtype = t;
        ktest::Buffer c(t, p.d.m * p.d.n);
        kernel(p.d, p.a.data(), &p.scales[0], p.b.data(), &p.scales[1], bias.data(), c.data());
        ktest::Buffer want(t, p.d.m * p.d.n);
        for (std::int64_t i = 0; i < p.d.m * p.d.n; ++i) {
          want.set(i, plain[static_cast<std::size_t>(i)] + bias.get(i % p.d.n));
        }
        ktest::expect_bitwise(c, want, std::string("bias ") + name(bias_dtype) + " -> " + name(t));
      }
      // k = 0: the sums are empty, C is the bias rounded to C's dtype.
      Problem empty = p;
      empty.d.k = 0;
      empty.d.c_dtype = DType::f32;
      const std::vector<float> c0 = [&] {
        std::vector<float> c(static_cast<std::size_t>(empty.d.m * empty.d.n), -1.0f);
        kernel(empty.d, empty.a.data(), &empty.scales[0], empty.b.data(), &empty.scales[1],
               bias.data(), c.data());
        return c;
      }();
      for (std::size_t i = 0; i < c0.size(); ++i) {
        EXPECT_EQ(c0[i], bias.get(static_cast<std::int64_t>(i) % 13)) << name(bias_dtype) << " " << i;
      }
    }
  }
}

TEST(Fp8Gemm, NanPropagatesAndEmptyReductionIsZero) {
  Problem p = make(DType::f8e4m3, DType::f8e4m3, 3, 4, 16, 4, 1.0f, 1.0f);
  p.a[5] = 0x7f;  // E4M3's NaN, in row 0
  for (auto kernel : {&ref::fp8_gemm, &cpu::fp8_gemm}) {
    const std::vector<float> c = run(kernel, p);
    for (std::int64_t j = 0; j < 4; ++j) EXPECT_TRUE(std::isnan(c[static_cast<std::size_t>(j)])) << j;
    for (std::size_t i = 4; i < c.size(); ++i) EXPECT_FALSE(std::isnan(c[i])) << i;
  }
  p.d.k = 0;
  for (auto kernel : {&ref::fp8_gemm, &cpu::fp8_gemm}) {
    const std::vector<float> c = run(kernel, p);
    for (float v : c) EXPECT_EQ(v, 0.0f);
  }
}

TEST(Fp8Gemm, RefusesBadArgumentsBeforeWriting) {
  const Problem good = make(DType::f8e4m3, DType::f8e4m3, 2, 2, 16, 4, 1.0f, 1.0f);
  float c[4] = {7, 7, 7, 7};
  const auto call = [&](Fp8GemmDesc d, const float* sa) {
    ref::fp8_gemm(d, good.a.data(), sa, good.b.data(), &good.scales[1], nullptr, c);
  };
  Fp8GemmDesc both_e5m2 = good.d;
  both_e5m2.a_dtype = both_e5m2.b_dtype = DType::f8e5m2;
  EXPECT_THROW(call(both_e5m2, &good.scales[0]), DTypeError);
  Fp8GemmDesc f32_operand = good.d;
  f32_operand.a_dtype = DType::f32;
  EXPECT_THROW(call(f32_operand, &good.scales[0]), DTypeError);
  Fp8GemmDesc fp8_out = good.d;
  fp8_out.c_dtype = DType::f8e4m3;
  EXPECT_THROW(call(fp8_out, &good.scales[0]), DTypeError);
  Fp8GemmDesc negative = good.d;
  negative.k = -1;
  EXPECT_THROW(call(negative, &good.scales[0]), ShapeError);
  EXPECT_THROW(call(good.d, nullptr), ValueError);
  Fp8GemmDesc no_bias_pointer = good.d;  // has_bias without the bias
  no_bias_pointer.has_bias = true;
  EXPECT_THROW(call(no_bias_pointer, &good.scales[0]), ValueError);
  Fp8GemmDesc fp8_bias = no_bias_pointer;
  fp8_bias.bias_dtype = DType::f8e4m3;
  EXPECT_THROW(call(fp8_bias, &good.scales[0]), DTypeError);
  // through the entry point, on the active backend, with the same message
  EXPECT_THROW(kernels::fp8_gemm(both_e5m2, good.a.data(), &good.scales[0], good.b.data(),
                                 &good.scales[1], nullptr, c),
               DTypeError);
  for (float v : c) EXPECT_EQ(v, 7.0f);
}

}  // namespace
}  // namespace mixprec::kernels
