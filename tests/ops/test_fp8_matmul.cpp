// Emulated fp8 matmul/linear (exact decode to f32, f32 GEMM) against a double reference of the
// decoded values with the f32-accumulation tolerance; per-tensor power-of-two scaling
// (fp8_quantize) and the scaled matmul against the error bound the formats' unit roundoff gives;
// straight-through gradients; argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/runtime/autocast.h"
#include "mixprec/core/float8.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/numerics/formats.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/fp8.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "ops/f32_gemm_reference.h"

namespace mixprec {
namespace {

constexpr DType kFp8[] = {DType::f8e4m3, DType::f8e5m2};

using test::expect_f32_accumulation;
using test::gamma_f32;
using test::ref_matmul;

std::uint8_t ref_encode(double x, DType t) {
  return t == DType::f8e4m3 ? numerics::encode_e4m3(x) : numerics::encode_e5m2(x);
}

TEST(Fp8Matmul, EqualsTheF32ProductOfTheDecodedValues) {
  const std::int64_t m = 7, k = 33, n = 5;
  const Tensor a32 = Tensor::randn({m, k}, 1, DType::f32, 0.0f, 2.0f);
  const Tensor b32 = Tensor::randn({k, n}, 2, DType::f32, 0.0f, 3.0f);
  for (DType ta : kFp8) {
    for (DType tb : kFp8) {
      const std::string where = std::string(name(ta)) + " @ " + name(tb);
      const Tensor a = a32.to(ta), b = b32.to(tb);
      const Tensor y = matmul(a, b);
      EXPECT_EQ(y.dtype(), DType::f32) << where;
      EXPECT_EQ(y.shape(), (Shape{m, n})) << where;
      std::vector<double> ref, absy;
      ref_matmul(a.to_vector(), b.to_vector(), m, k, n, ref, absy);
      expect_f32_accumulation(y.to_vector(), ref, absy, k, where);
    }
  }
}

TEST(Fp8Matmul, BatchedAndTransposedOperands) {
  const std::int64_t batch = 3, m = 4, k = 6, n = 5;
  const Tensor a = Tensor::uniform({batch, m, k}, 3, -4.0f, 4.0f).to(DType::f8e4m3);
  // b is a transposed (strided) fp8 view: the decode makes it contiguous.
  const Tensor bt = Tensor::uniform({batch, n, k}, 4, -4.0f, 4.0f).to(DType::f8e5m2);
  const Tensor b = bt.transpose(1, 2);
  ASSERT_FALSE(b.is_contiguous());
  const Tensor y = matmul(a, b);
  ASSERT_EQ(y.shape(), (Shape{batch, m, n}));
  const std::vector<float> av = a.to_vector(), bv = b.to_vector(), yv = y.to_vector();
  for (std::int64_t i = 0; i < batch; ++i) {
    const auto sl = [&](const std::vector<float>& v, std::int64_t size) {
      return std::vector<float>(v.begin() + i * size, v.begin() + (i + 1) * size);
    };
    std::vector<double> ref, absy;
    ref_matmul(sl(av, m * k), sl(bv, k * n), m, k, n, ref, absy);
    expect_f32_accumulation(sl(yv, m * n), ref, absy, k, "batch " + std::to_string(i));
  }
}

TEST(Fp8Matmul, AutocastRegionsDoNotChangeTheF32Result) {
  const Tensor a = Tensor::randn({8, 16}, 5).to(DType::f8e4m3);
  const Tensor b = Tensor::randn({16, 4}, 6).to(DType::f8e4m3);
  const Tensor outside = matmul(a, b);
  for (DType lower : {DType::bf16, DType::f16}) {
    runtime::Autocast region(true, lower);
    const Tensor inside = matmul(a, b);
    EXPECT_EQ(inside.dtype(), DType::f32) << name(lower);
    EXPECT_EQ(inside.to_vector(), outside.to_vector()) << name(lower);
    EXPECT_EQ(linear(a, b.transpose(0, 1)).dtype(), DType::f32) << name(lower);
  }
}

TEST(Fp8Linear, MatchesTheReferenceWithAnyBiasDtype) {
  const std::int64_t batch = 2, rows = 3, in = 10, out = 6;
  const Tensor x = Tensor::randn({batch, rows, in}, 7).to(DType::f8e4m3);
  const Tensor w = Tensor::randn({out, in}, 8, DType::f32, 0.0f, 0.5f).to(DType::f8e5m2);
  const std::vector<float> bias_values{0.5f, -1.0f, 2.0f, 0.0f, 3.0f, -0.25f};
  for (DType bias_dtype : {DType::f32, DType::bf16, DType::f8e4m3}) {
    const Tensor bias = Tensor::from_vector(bias_values, {out}, bias_dtype);
    const Tensor y = linear(x, w, bias);
    ASSERT_EQ(y.shape(), (Shape{batch, rows, out}));
    EXPECT_EQ(y.dtype(), DType::f32);
    // Reference: x2d [6, in] @ w^T [in, out] + bias, all from decoded values.
    const std::vector<float> xv = x.to_vector(), bv = bias.to_vector();
    const std::vector<float> wt = w.transpose(0, 1).to_vector();
    std::vector<double> ref, absy;
    ref_matmul(xv, wt, batch * rows, in, out, ref, absy);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      ref[i] += bv[i % static_cast<std::size_t>(out)];
      absy[i] += std::fabs(static_cast<double>(bv[i % static_cast<std::size_t>(out)]));
    }
    expect_f32_accumulation(y.to_vector(), ref, absy, in + 1, name(bias_dtype));
  }
  EXPECT_EQ(linear(x, w).shape(), (Shape{batch, rows, out}));  // no bias
}

TEST(Fp8Matmul, MixedFp8AndWiderOperandsAreRefused) {
  const Tensor q = Tensor::ones({2, 2}, DType::f8e4m3);
  const Tensor f = Tensor::ones({2, 2});
  for (auto run : {+[](const Tensor& a, const Tensor& b) { return matmul(a, b); },
                   +[](const Tensor& a, const Tensor& b) { return linear(a, b); }}) {
    for (bool fp8_first : {true, false}) {
      try {
        fp8_first ? run(q, f) : run(f, q);
        FAIL() << "expected DTypeError";
      } catch (const DTypeError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("is f8e4m3 but"), std::string::npos) << what;
        EXPECT_NE(what.find("needs both operands in fp8"), std::string::npos) << what;
      }
    }
  }
  // An fp8 bias alone does not make an fp8 linear.
  try {
    linear(f, f, Tensor::ones({2}, DType::f8e5m2));
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("linear: f8e5m2 is a storage dtype"), std::string::npos)
        << e.what();
  }
  // Shape errors still come from matmul's own checks after the decode.
  EXPECT_THROW(matmul(q, Tensor::ones({3, 2}, DType::f8e5m2)), ShapeError);
}

// ---- straight-through gradients -------------------------------------------------------------

TEST(Fp8Matmul, GradientsAreTheF32GemmGradientsOfTheDecodedValues) {
  const std::int64_t m = 4, k = 6, n = 3;
  Tensor x = Tensor::randn({m, k}, 11);
  Tensor w = Tensor::randn({k, n}, 12);
  x.set_requires_grad();
  w.set_requires_grad();
  const Tensor g = Tensor::randn({m, n}, 13);  // upstream gradient
  const Tensor qx = x.to(DType::f8e4m3), qw = w.to(DType::f8e5m2);
  sum(mul(matmul(qx, qw), g)).backward();
  ASSERT_EQ(x.grad().dtype(), DType::f32);
  ASSERT_EQ(w.grad().dtype(), DType::f32);
  // dX = G @ Wq^T and dW = Xq^T @ G, with Xq, Wq the decoded values (the cast passes 1).
  const std::vector<float> gv = g.to_vector(), xq = qx.to_vector(), wq = qw.to_vector();
  const std::vector<float> dx = x.grad().to_vector(), dw = w.grad().to_vector();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t p = 0; p < k; ++p) {
      double s = 0, sa = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double t = static_cast<double>(gv[static_cast<std::size_t>(i * n + j)]) *
                         wq[static_cast<std::size_t>(p * n + j)];
        s += t;
        sa += std::fabs(t);
      }
      EXPECT_NEAR(dx[static_cast<std::size_t>(i * k + p)], s, 2 * gamma_f32(n) * sa + 1e-30);
    }
  }
  for (std::int64_t p = 0; p < k; ++p) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0, sa = 0;
      for (std::int64_t i = 0; i < m; ++i) {
        const double t = static_cast<double>(xq[static_cast<std::size_t>(i * k + p)]) *
                         gv[static_cast<std::size_t>(i * n + j)];
        s += t;
        sa += std::fabs(t);
      }
      EXPECT_NEAR(dw[static_cast<std::size_t>(p * n + j)], s, 2 * gamma_f32(m) * sa + 1e-30);
    }
  }
}

// ---- scaling --------------------------------------------------------------------------------

TEST(Fp8Quantize, PicksThePowerOfTwoThatFillsTheRange) {
  for (DType t : kFp8) {
    const double max = traits(t).max;
    for (float amax : {1.0f, 3.7f, 448.0f, 449.0f, 1e6f, 2.5e-5f, 1e-30f, 3e38f}) {
      const Tensor x = Tensor::from_vector({amax / 3, -amax, 0.0f}, {3});
      const Fp8Quantized q = fp8_quantize(x, t);
      const std::string where = std::string(name(t)) + " amax " + std::to_string(amax);
      EXPECT_EQ(q.tensor.dtype(), t) << where;
      int e = 0;
      EXPECT_EQ(std::frexp(static_cast<double>(q.scale), &e), 0.5) << where << ": not 2^k";
      const double scaled = static_cast<double>(amax) / q.scale;
      EXPECT_LE(scaled, max) << where;
      if (e - 1 > -126) {  // the smallest such power of two (unless clamped)
        EXPECT_GT(scaled, max / 2) << where;
      }
      // Each element is round_to_nearest_even(x / scale), exactly once.
      const std::vector<float> xv = x.to_vector();
      const auto* bytes = static_cast<const std::uint8_t*>(q.tensor.data_ptr());
      for (std::size_t i = 0; i < xv.size(); ++i) {
        EXPECT_EQ(bytes[i], ref_encode(static_cast<double>(xv[i]) / q.scale, t)) << where;
      }
    }
    const Fp8Quantized zero = fp8_quantize(Tensor::zeros({4}), t);
    EXPECT_EQ(zero.scale, 1.0f);
    EXPECT_EQ(zero.tensor.to_vector(), std::vector<float>(4, 0.0f));
    // Tiny amax: the scale is clamped at 2^-126 (still a normal float).
    EXPECT_EQ(fp8_quantize(Tensor::from_vector({1e-44f}, {1}), t).scale, std::ldexp(1.0f, -126));
    // bf16 and fp8 inputs are widened first.
    const Tensor xb = Tensor::from_vector({1000.0f, -3.0f}, {2}, DType::bf16);
    EXPECT_EQ(fp8_quantize(xb, t).scale, fp8_quantize(xb.to(DType::f32), t).scale);
    EXPECT_NO_THROW(fp8_quantize(xb.to(DType::f8e5m2), t));
  }
}

TEST(Fp8Quantize, RejectsNonFiniteInputsAndNonFp8Formats) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf}) {
    try {
      fp8_quantize(Tensor::from_vector({1.0f, bad}, {2}), DType::f8e4m3);
      FAIL() << "expected ValueError for " << bad;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("NaN or Inf"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(fp8_quantize(Tensor::ones({2}), DType::bf16), DTypeError);
  EXPECT_THROW(fp8_quantize(Tensor(), DType::f8e4m3), StateError);
  const Tensor q = Tensor::ones({2, 2}, DType::f8e4m3);
  EXPECT_THROW(fp8_scaled_matmul(q, 0.0f, q, 1.0f), ValueError);
  EXPECT_THROW(fp8_scaled_matmul(q, 1.0f, q, nan), ValueError);
  EXPECT_THROW(fp8_scaled_matmul(q, 1.0f, Tensor::ones({2, 2}), 1.0f), DTypeError);
}

/// For a = values of x quantised with scale s: |q * s - x| <= max(u |x|, s * min_subnormal / 2),
/// the error of one rounding to nearest (relative in the normal range, absolute below it).
double quant_err(double x, double s, DType t) {
  const double u = traits(t).epsilon / 2;
  return std::max(u * std::fabs(x), s * traits(t).min_subnormal / 2);
}

TEST(Fp8ScaledMatmul, ErrorStaysWithinTheUnitRoundoffBound) {
  const std::int64_t m = 16, k = 64, n = 12;
  for (DType t : kFp8) {
    for (float magnitude : {1e-6f, 1.0f, 1e6f}) {  // unscaled fp8 could not hold 1e6 or 1e-6
      const std::string where = std::string(name(t)) + " magnitude " + std::to_string(magnitude);
      const Tensor a = Tensor::randn({m, k}, 21, DType::f32, 0.0f, magnitude);
      const Tensor b = Tensor::randn({k, n}, 22, DType::f32, 0.0f, 1.0f / magnitude);
      const Fp8Quantized qa = fp8_quantize(a, t), qb = fp8_quantize(b, t);
      const Tensor y = fp8_scaled_matmul(qa, qb);
      ASSERT_EQ(y.dtype(), DType::f32);
      const std::vector<float> av = a.to_vector(), bv = b.to_vector(), yv = y.to_vector();
      const double sa = qa.scale, sb = qb.scale;
      double err2 = 0, ref2 = 0;
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          // Exact product and the bound: sum over p of |ea||b| + |a||eb| + |ea||eb| (quantisation)
          // plus the f32 accumulation of the quantised products.
          double exact = 0, bound = 0, absq = 0;
          for (std::int64_t p = 0; p < k; ++p) {
            const double x = av[static_cast<std::size_t>(i * k + p)];
            const double w = bv[static_cast<std::size_t>(p * n + j)];
            const double ex = quant_err(x, sa, t), ew = quant_err(w, sb, t);
            exact += x * w;
            bound += ex * std::fabs(w) + std::fabs(x) * ew + ex * ew;
            absq += (std::fabs(x) + ex) * (std::fabs(w) + ew);
          }
          bound += gamma_f32(k) * absq;
          const double got = yv[static_cast<std::size_t>(i * n + j)];
          EXPECT_LE(std::fabs(got - exact), bound) << where << " (" << i << ", " << j << ")";
          err2 += (got - exact) * (got - exact);
          ref2 += exact * exact;
        }
      }
      // In aggregate the error is a fraction of the format's epsilon (two roundings of relative
      // size <= u = eps/2 per product, partly cancelling across the k terms).
      EXPECT_LT(std::sqrt(err2 / ref2), traits(t).epsilon) << where;
    }
  }
  // Without scaling, E4M3 cannot even hold the inputs.
  const Tensor big = Tensor::full({2, 2}, 1e6f);
  EXPECT_TRUE(std::isnan(big.to(DType::f8e4m3).to_vector()[0]));
  const Fp8Quantized qbig = fp8_quantize(big, DType::f8e4m3);
  const float v = qbig.tensor.to_vector()[0] * qbig.scale;  // 1e6 rounded once: 983040
  const float got = fp8_scaled_matmul(qbig, qbig).to_vector()[0];
  EXPECT_EQ(got, 2.0f * v * v);
  const double u = traits(DType::f8e4m3).epsilon / 2;
  EXPECT_NEAR(got, 2e12, 2e12 * (2 * u + u * u));
}

TEST(Fp8ScaledMatmul, ScalesOutsideFloatRangeAreAppliedOneAtATime) {
  // 448 * 448 * 2^-80 * 2^-80 is an f32 denormal, but the product of the scales, 2^-160, is not
  // a float at all: applying it in one multiply would give 0.
  const Tensor a = Tensor::full({1, 1}, 448.0f, DType::f8e4m3);
  const float s = std::ldexp(1.0f, -80);
  const auto want = static_cast<float>(448.0 * 448.0 * std::ldexp(1.0, -160));
  ASSERT_GT(want, 0.0f);
  EXPECT_EQ(fp8_scaled_matmul(a, s, a, s).to_vector()[0], want);
  const float big = std::ldexp(1.0f, 100);
  EXPECT_EQ(fp8_scaled_matmul(a, big, a, 1.0f / big).to_vector()[0], 448.0f * 448.0f);
  EXPECT_TRUE(std::isinf(fp8_scaled_matmul(a, big, a, big).to_vector()[0]));
  // Why scaling exists: 2^-100 flushes to zero in fp8 unless a scale carries it.
  EXPECT_EQ(Tensor::full({1}, std::ldexp(1.0f, -100)).to(DType::f8e4m3).to_vector()[0], 0.0f);
}

TEST(Fp8ScaledMatmul, GradientIsStraightThroughIncludingTheScales) {
  Tensor x = Tensor::randn({3, 5}, 31, DType::f32, 0.0f, 1000.0f);
  x.set_requires_grad();
  const Tensor w = Tensor::randn({5, 2}, 32, DType::f32, 0.0f, 0.001f);
  const Fp8Quantized qx = fp8_quantize(x, DType::f8e4m3), qw = fp8_quantize(w, DType::f8e4m3);
  sum(fp8_scaled_matmul(qx, qw)).backward();
  // d/dx sum(Q(x / sx) sx @ Wq sw) with Q passing 1: row i of dX is sum_j Wq[p, j] sw.
  const std::vector<float> wq = qw.tensor.to_vector(), dx = x.grad().to_vector();
  ASSERT_EQ(x.grad().dtype(), DType::f32);
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t p = 0; p < 5; ++p) {
      const double want = (static_cast<double>(wq[static_cast<std::size_t>(p * 2)]) +
                           wq[static_cast<std::size_t>(p * 2 + 1)]) * qw.scale;
      EXPECT_NEAR(dx[static_cast<std::size_t>(i * 5 + p)], want, 1e-6 * std::fabs(want) + 1e-12);
    }
  }
}

}  // namespace
}  // namespace mixprec
