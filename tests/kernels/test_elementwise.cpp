// Elementwise kernels: kernels:: (vector paths) against kernels::ref:: for every op, dtype pair,
// odd sizes and broadcast layouts; bit-identity with the reference under Isa::scalar; NaN
// semantics; finite-difference checks of every unary backward; accuracy of the vector exp/log/
// tanh/gelu/sigmoid against double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;

constexpr std::int64_t kSizes[] = {1, 15, 17, 1000, 70001};
constexpr UnaryOp kUnaryOps[] = {UnaryOp::neg,  UnaryOp::abs,        UnaryOp::exp,
                                 UnaryOp::log,  UnaryOp::sqrt,       UnaryOp::rsqrt,
                                 UnaryOp::reciprocal, UnaryOp::square, UnaryOp::relu,
                                 UnaryOp::gelu, UnaryOp::tanh,       UnaryOp::sigmoid};
constexpr BinaryOp kBinaryOps[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul,
                                   BinaryOp::div, BinaryOp::maximum, BinaryOp::minimum};
// (input, output) dtype pairs: the vectorised ones, plus f32 -> bf16, which the dispatcher
// must send to the reference.
constexpr std::array<std::pair<DType, DType>, 6> kPairs{{{DType::f32, DType::f32},
                                                         {DType::bf16, DType::bf16},
                                                         {DType::f16, DType::f16},
                                                         {DType::bf16, DType::f32},
                                                         {DType::f16, DType::f32},
                                                         {DType::f32, DType::bf16}}};

/// Ops whose vector code performs the same IEEE operations as the reference: bit-identical.
bool exact_unary(UnaryOp op) {
  return op != UnaryOp::exp && op != UnaryOp::log && op != UnaryOp::gelu &&
         op != UnaryOp::tanh && op != UnaryOp::sigmoid;
}

/// An input range that exercises op (positive where the op needs it; gelu reaches its
/// underflowing tail; exp overflows f16 beyond 11).
std::pair<float, float> domain(UnaryOp op) {
  switch (op) {
    case UnaryOp::log: case UnaryOp::sqrt: case UnaryOp::rsqrt: return {0.01f, 100.0f};
    case UnaryOp::exp: return {-20.0f, 20.0f};
    case UnaryOp::gelu: return {-16.0f, 16.0f};
    default: return {-10.0f, 10.0f};
  }
}

std::string label(const char* op, DType in, DType out, std::int64_t n, Isa isa) {
  return std::string(op) + " " + name(in) + "->" + name(out) + " n=" + std::to_string(n) +
         " isa=" + name(isa);
}

/// Tolerance for transcendental ops against the reference. f32 output: the vector
/// approximations are within 5.2 ulp of the exact value and glibc within 1, so 8 ulp (an ulp is
/// at most eps*|v|), plus 16 subnormal units for results in the subnormal range (gelu's tail).
/// 16-bit output: f32 results that close round to the same or an adjacent value, one ulp
/// <= eps*|v| apart; k = 2 leaves margin, atol one subnormal unit of the dtype.
void expect_transcendental_close(const Buffer& got, const Buffer& want, const std::string& what) {
  const DType out = want.dtype();
  const bool f32 = out == DType::f32;
  ktest::expect_close(got, want, traits(out).min_subnormal * (f32 ? 16 : 1), f32 ? 8.0 : 2.0,
                      what);
}

TEST(ElementwiseUnary, MatchesReferenceForEveryOpDtypeAndSize) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (UnaryOp op : kUnaryOps) {
      for (auto [in_dt, out_dt] : kPairs) {
        for (std::int64_t n : kSizes) {
          const auto [lo, hi] = domain(op);
          const Buffer x = ktest::random_buffer(in_dt, n, lo, hi, 17u + static_cast<unsigned>(n));
          Buffer got(out_dt, n), want(out_dt, n);
          const std::int64_t shape[] = {n};
          const std::int64_t strides[] = {1};
          unary(op, shape, {x.data(), in_dt, strides}, got.data(), out_dt);
          ref::unary(op, shape, {x.data(), in_dt, strides}, want.data(), out_dt);
          const std::string what = label(name(op), in_dt, out_dt, n, isa);
          if (isa == Isa::scalar || exact_unary(op)) {
            ktest::expect_bitwise(got, want, what);
          } else {
            expect_transcendental_close(got, want, what);
          }
        }
      }
    }
  }
}

// The reference's odometer against explicit index arithmetic, on a permuted 3-d view with a
// broadcast dimension; the dispatcher must take the same (reference) path for it.
TEST(ElementwiseUnary, StridedAndBroadcastInputFollowsStrides) {
  const std::int64_t d0 = 3, d1 = 5, d2 = 7;
  const Buffer base = ktest::random_buffer(DType::f32, d0 * d2, -4.0f, 4.0f, 5);
  const std::int64_t shape[] = {d0, d1, d2};
  const std::int64_t strides[] = {1, 0, d0};  // element (i, j, k) = base[i + k * d0]
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    Buffer got(DType::bf16, d0 * d1 * d2), want(DType::bf16, d0 * d1 * d2);
    unary(UnaryOp::square, shape, {base.data(), DType::f32, strides}, got.data(), DType::bf16);
    for (std::int64_t i = 0; i < d0; ++i) {
      for (std::int64_t j = 0; j < d1; ++j) {
        for (std::int64_t k = 0; k < d2; ++k) {
          const float v = base.get(i + k * d0);
          want.set((i * d1 + j) * d2 + k, v * v);
        }
      }
    }
    ktest::expect_bitwise(got, want, std::string("strided square isa=") + name(isa));
  }
}

TEST(ElementwiseUnary, NanAndSignedZeroSemantics) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : ktest::kAllDTypes) {
      Buffer x(dt, 17);
      for (std::int64_t i = 0; i < 17; ++i) x.set(i, static_cast<float>(i) - 8.0f);
      x.set(3, nan);
      x.set(8, -0.0f);
      Buffer y(dt, 17);
      const std::int64_t shape[] = {17}, strides[] = {1};
      unary(UnaryOp::relu, shape, {x.data(), dt, strides}, y.data(), dt);
      EXPECT_TRUE(std::isnan(y.get(3))) << "relu(NaN) must be NaN, " << name(dt);
      EXPECT_FALSE(std::signbit(y.get(8))) << "relu(-0) is +0, " << name(dt);
      EXPECT_EQ(y.get(0), 0.0f);
      EXPECT_EQ(y.get(16), 8.0f);
    }
  }
}

/// Runs kernels::binary and ref::binary on one layout and expects identical bits (the ops are
/// single IEEE operations in both, rounded once to the output dtype).
void check_binary_layout(BinaryOp op, std::span<const std::int64_t> shape, const Buffer& a,
                         std::span<const std::int64_t> sa, const Buffer& b,
                         std::span<const std::int64_t> sb, DType out_dt, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  Buffer got(out_dt, n), want(out_dt, n);
  binary(op, shape, {a.data(), a.dtype(), sa}, {b.data(), b.dtype(), sb}, got.data(), out_dt);
  ref::binary(op, shape, {a.data(), a.dtype(), sa}, {b.data(), b.dtype(), sb}, want.data(),
              out_dt);
  ktest::expect_bitwise(got, want, what);
}

TEST(ElementwiseBinary, MatchesReferenceOnEveryLayout) {
  struct Layout {
    const char* name;
    std::vector<std::int64_t> shape, sa, sb;
    std::int64_t na, nb;  // elements the operands' buffers need
  };
  std::vector<Layout> layouts;
  for (std::int64_t n : kSizes) {
    layouts.push_back({"contiguous", {n}, {1}, {1}, n, n});
    layouts.push_back({"scalar b", {n}, {1}, {0}, n, 1});
    layouts.push_back({"scalar a", {n}, {0}, {1}, 1, n});
  }
  for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{3, 17}, {64, 1000}, {40, 1001}}) {
    layouts.push_back({"row-broadcast b", {r, c}, {c, 1}, {0, 1}, r * c, c});
    layouts.push_back({"row-broadcast a", {r, c}, {0, 1}, {c, 1}, c, r * c});
    layouts.push_back({"column-broadcast b", {r, c}, {c, 1}, {1, 0}, r * c, r});
    layouts.push_back({"column-broadcast a", {r, c}, {1, 0}, {c, 1}, r, r * c});
    layouts.push_back({"transposed a", {r, c}, {1, r}, {c, 1}, r * c, r * c});
  }
  layouts.push_back({"bias over [B,T,C]", {4, 5, 33}, {165, 33, 1}, {0, 0, 1}, 660, 33});
  layouts.push_back({"size-1 dims", {1, 37, 1}, {37, 1, 1}, {0, 1, 5}, 37, 37});
  layouts.push_back({"rank 0", {}, {}, {}, 1, 1});
  layouts.push_back({"empty", {0, 5}, {5, 1}, {0, 1}, 0, 5});
  layouts.push_back({"both scalar", {9}, {0}, {0}, 1, 1});
  layouts.push_back({"outer broadcast 3-d", {6, 4, 19}, {0, 19, 1}, {76, 19, 1}, 76, 456});

  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (BinaryOp op : kBinaryOps) {
      for (auto [dt, out_dt] : kPairs) {
        for (const Layout& l : layouts) {
          const Buffer a = ktest::random_buffer(dt, l.na, -10.0f, 10.0f, 3);
          const Buffer b = ktest::random_buffer(dt, l.nb, -10.0f, 10.0f, 4);
          check_binary_layout(op, l.shape, a, l.sa, b, l.sb, out_dt,
                              label(name(op), dt, out_dt, l.na, isa) + " " + l.name);
        }
      }
      // Mixed input dtypes (reference path) and a scalar of another dtype (vector path).
      const Buffer a = ktest::random_buffer(DType::f32, 1000, -10.0f, 10.0f, 5);
      const Buffer b = ktest::random_buffer(DType::bf16, 1000, -10.0f, 10.0f, 6);
      const std::int64_t shape[] = {1000}, one[] = {1}, zero[] = {0};
      check_binary_layout(op, shape, a, one, b, one, DType::f32,
                          std::string(name(op)) + " f32+bf16 isa=" + name(isa));
      check_binary_layout(op, shape, a, one, b, zero, DType::f32,
                          std::string(name(op)) + " f32+bf16 scalar isa=" + name(isa));
    }
  }
}

// The reference itself against explicit index arithmetic for a broadcast that is not a plain
// row/column case (and which therefore also takes the reference path in kernels::binary).
TEST(ElementwiseBinary, ReferenceBroadcastFollowsStrides) {
  const std::int64_t shape[] = {4, 3, 5};
  const std::int64_t sa[] = {5, 0, 1};   // a is [4, 1, 5]
  const std::int64_t sb[] = {0, 1, 3};   // b is [1, 3, 5] stored transposed as [5, 3]
  const Buffer a = ktest::random_buffer(DType::f32, 20, -3.0f, 3.0f, 8);
  const Buffer b = ktest::random_buffer(DType::f16, 15, -3.0f, 3.0f, 9);
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    Buffer got(DType::f32, 60);
    binary(BinaryOp::sub, shape, {a.data(), DType::f32, sa}, {b.data(), DType::f16, sb},
           got.data(), DType::f32);
    for (std::int64_t i = 0; i < 4; ++i) {
      for (std::int64_t j = 0; j < 3; ++j) {
        for (std::int64_t k = 0; k < 5; ++k) {
          EXPECT_EQ(got.get((i * 3 + j) * 5 + k), a.get(i * 5 + k) - b.get(j + k * 3));
        }
      }
    }
  }
}

TEST(ElementwiseBinary, MaximumAndMinimumPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : ktest::kAllDTypes) {
      Buffer a = ktest::random_buffer(dt, 33, -1.0f, 1.0f, 1);
      Buffer b = ktest::random_buffer(dt, 33, -1.0f, 1.0f, 2);
      a.set(2, nan);   // NaN in the first operand
      b.set(20, nan);  // NaN in the second operand
      a.set(32, nan);
      b.set(32, nan);
      const std::int64_t shape[] = {33}, one[] = {1};
      for (BinaryOp op : {BinaryOp::maximum, BinaryOp::minimum}) {
        Buffer got(dt, 33), want(dt, 33);
        binary(op, shape, {a.data(), dt, one}, {b.data(), dt, one}, got.data(), dt);
        ref::binary(op, shape, {a.data(), dt, one}, {b.data(), dt, one}, want.data(), dt);
        for (std::int64_t i : {2, 20, 32}) {
          EXPECT_TRUE(std::isnan(got.get(i))) << name(op) << " " << name(dt) << " [" << i << "]";
        }
        ktest::expect_bitwise(got, want, std::string(name(op)) + " NaN " + name(dt));
        // NaN as a broadcast scalar, on either side.
        const std::int64_t zero[] = {0};
        binary(op, shape, {a.data(), dt, one}, {b.data(), dt, zero}, got.data(), dt);
        EXPECT_TRUE(std::isnan(got.get(2))) << name(op) << " " << name(dt);
        ref::binary(op, shape, {a.data(), dt, one}, {b.data(), dt, zero}, want.data(), dt);
        ktest::expect_bitwise(got, want, std::string(name(op)) + " NaN scalar " + name(dt));
        Buffer nan_scalar(dt, 1);
        nan_scalar.set(0, nan);
        binary(op, shape, {nan_scalar.data(), dt, zero}, {b.data(), dt, one}, got.data(), dt);
        for (std::int64_t i = 0; i < 33; ++i) EXPECT_TRUE(std::isnan(got.get(i)));
      }
    }
  }
}

TEST(ElementwiseAffine, MatchesReference) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (auto [in_dt, out_dt] : kPairs) {
      for (std::int64_t n : kSizes) {
        const Buffer x = ktest::random_buffer(in_dt, n, -5.0f, 5.0f, 11);
        Buffer got(out_dt, n), want(out_dt, n);
        const float alpha = -1.75f, beta = 0.3f;
        affine(x.data(), in_dt, got.data(), out_dt, n, alpha, beta);
        ref::affine(x.data(), in_dt, want.data(), out_dt, n, alpha, beta);
        const std::string what = label("affine", in_dt, out_dt, n, isa);
        if (isa == Isa::scalar) {
          ktest::expect_bitwise(got, want, what);
          continue;
        }
        // The vector code may fuse alpha*x + beta into one FMA (one rounding fewer): the
        // results differ by at most half an f32 ulp of alpha*x, then one output ulp.
        const double e = ktest::eps(out_dt), e32 = ktest::eps(DType::f32);
        ktest::expect_close(got, want, [&](std::int64_t i) {
          return std::fabs(alpha * x.get(i)) * e32 + std::fabs(want.get(i)) * e;
        }, what);
      }
    }
  }
}

TEST(ElementwiseFill, RoundsOnceAndFillsEveryElement) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : ktest::kAllDTypes) {
      for (std::int64_t n : kSizes) {
        Buffer got(dt, n), want(dt, n);
        fill(got.data(), dt, n, 0.1f);
        ref::fill(want.data(), dt, n, 0.1f);
        ktest::expect_bitwise(got, want, label("fill", dt, dt, n, isa));
        Buffer one(dt, 1);
        one.set(0, 0.1f);
        EXPECT_EQ(got.bits(n - 1), one.bits(0));
      }
    }
  }
}

/// A forward input range for op and whether the backward reads x (else y).
bool reads_x(UnaryOp op) {
  return op == UnaryOp::abs || op == UnaryOp::log || op == UnaryOp::square ||
         op == UnaryOp::relu || op == UnaryOp::gelu;
}

TEST(ElementwiseUnaryBackward, MatchesReferenceAndReadsOnlyItsOperand) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (UnaryOp op : kUnaryOps) {
      for (auto [in_dt, out_dt] : kPairs) {
        for (std::int64_t n : kSizes) {
          const auto [lo, hi] = domain(op);
          const Buffer v = ktest::random_buffer(in_dt, n, lo, hi, 21);
          const Buffer dy = ktest::random_buffer(in_dt, n, -2.0f, 2.0f, 22);
          Buffer got(out_dt, n), want(out_dt, n);
          // The operand the formula does not read is passed as null: it must not be touched.
          const void* x = reads_x(op) ? v.data() : nullptr;
          const void* y = reads_x(op) ? nullptr : v.data();
          unary_backward(op, x, in_dt, y, in_dt, dy.data(), in_dt, got.data(), out_dt, n);
          ref::unary_backward(op, x, in_dt, y, in_dt, dy.data(), in_dt, want.data(), out_dt, n);
          const std::string what = label(name(op), in_dt, out_dt, n, isa) + " backward";
          if (isa == Isa::scalar || (op != UnaryOp::gelu && op != UnaryOp::tanh)) {
            ktest::expect_bitwise(got, want, what);
          } else if (op == UnaryOp::tanh) {
            // dy (1 - y^2): the vector code may fuse 1 - y*y into one FMA; the difference is
            // at most half an f32 ulp of y^2 (times |dy|), then one output ulp.
            const double e = ktest::eps(out_dt), e32 = ktest::eps(DType::f32);
            ktest::expect_close(got, want, [&](std::int64_t i) {
              const double yi = v.get(i);
              return std::fabs(dy.get(i)) * yi * yi * e32 + std::fabs(want.get(i)) * e;
            }, what);
          } else {
            // gelu': Phi(x) + x phi(x) with the vector erfc/exp (<= 5.2 ulp each) and an FMA;
            // Phi + x phi cancels for x < 0, so the bound scales with |dy| (Phi + |x| phi)
            // rather than with the result; results in the f32 subnormal range (x < -13) lose
            // relative precision, hence 16 subnormal units.
            const double e = ktest::eps(out_dt), e32 = ktest::eps(DType::f32);
            ktest::expect_close(got, want, [&](std::int64_t i) {
              const double xi = v.get(i);
              const double cdf = 0.5 * std::erfc(-xi / std::sqrt(2.0));
              const double pdf = std::exp(-0.5 * xi * xi) / std::sqrt(2.0 * std::numbers::pi);
              return std::fabs(dy.get(i)) * (cdf + std::fabs(xi) * pdf) * 16 * e32 +
                     std::fabs(want.get(i)) * e + traits(out_dt).min_subnormal * 16;
            }, what);
          }
        }
      }
    }
  }
}

// d op(x)/dx from unary_backward against central differences of the forward kernel (f32),
// evaluated in double: (f(x+) - f(x-)) / (x+ - x-) with x+- the f32 neighbours actually used.
// With h = 1e-3, f32 rounding of f contributes ~eps|f|/2h ~ 1e-4 |f| and truncation h^2 f'''/6
// < 1e-5 relative at these points, so 1e-3 relative + 1e-4 absolute is meaningful (a wrong
// formula is off by O(1)).
TEST(ElementwiseUnaryBackward, FiniteDifferencesOfTheForwardKernel) {
  const std::vector<float> general = {-2.3f, -0.7f, -0.15f, 0.2f, 0.9f, 1.7f, 3.1f};
  const std::vector<float> positive = {0.3f, 0.9f, 1.7f, 3.1f, 7.5f};
  const double h = 1e-3;
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (UnaryOp op : kUnaryOps) {
      const bool pos = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt;
      const std::vector<float>& pts = pos ? positive : general;
      const std::int64_t n = static_cast<std::int64_t>(pts.size());
      std::vector<float> x(pts), xp(n), xm(n), y(n), fp(n), fm(n), dy(n, 0.75f), dx(n);
      for (std::int64_t i = 0; i < n; ++i) {
        xp[i] = static_cast<float>(x[i] + h);
        xm[i] = static_cast<float>(x[i] - h);
      }
      const std::int64_t shape[] = {n}, one[] = {1};
      auto forward = [&](const std::vector<float>& in, std::vector<float>& out) {
        unary(op, shape, {in.data(), DType::f32, one}, out.data(), DType::f32);
      };
      forward(x, y);
      forward(xp, fp);
      forward(xm, fm);
      unary_backward(op, x.data(), DType::f32, y.data(), DType::f32, dy.data(), DType::f32,
                     dx.data(), DType::f32, n);
      for (std::int64_t i = 0; i < n; ++i) {
        const double fd = 0.75 * (static_cast<double>(fp[i]) - fm[i]) /
                          (static_cast<double>(xp[i]) - xm[i]);
        EXPECT_NEAR(dx[i], fd, 1e-4 + 1e-3 * std::fabs(fd))
            << name(op) << " at x=" << x[i] << " isa=" << name(isa);
      }
    }
  }
}

/// Distance in f32 ulps (of the exact value) between a float result and an exact double.
double ulp_error(float got, double exact) {
  const double a = std::fabs(exact);
  int e = 0;
  std::frexp(a, &e);
  const double ulp = a < 1.1754943508222875e-38 ? std::ldexp(1.0, -149) : std::ldexp(1.0, e - 24);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

// The vector approximations against the exact (double) functions on ~1M floats spread over
// their whole ranges: these bounds are the accuracy documented in vecmath_avx512.h (measured
// maxima exp 1.0, log 0.8, tanh 1.3, erfc 5.0, gelu 5.2 ulp; sigmoid adds two roundings).
TEST(ElementwiseVecMath, AccuracyAgainstDoublePrecision) {
  struct Case {
    UnaryOp op;
    float lo, hi;
    double max_ulp;
    double (*exact)(double x);
  };
  const Case cases[] = {
      {UnaryOp::exp, -87.0f, 88.0f, 2.0, [](double x) { return std::exp(x); }},
      {UnaryOp::log, 1e-37f, 3e38f, 2.0, [](double x) { return std::log(x); }},
      {UnaryOp::tanh, -3e38f, 3e38f, 2.0, [](double x) { return std::tanh(x); }},
      {UnaryOp::sigmoid, -80.0f, 80.0f, 4.0,
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      // gelu as the kernels define it: z = -x/sqrt2 rounded to f32 first, then exact.
      {UnaryOp::gelu, -12.0f, 12.0f, 7.0, [](double x) {
         const float z = -static_cast<float>(x) * 0.70710678118654752f;
         return 0.5 * x * std::erfc(static_cast<double>(z));
       }},
  };
  for (const Case& c : cases) {
    // Every float in [lo, hi] with a stride in bit patterns, both signs walked separately.
    std::vector<float> xs;
    auto walk = [&](float from, float to) {  // 0 <= from < to, in magnitude
      std::uint32_t a = 0, b = 0;
      std::memcpy(&a, &from, 4);
      std::memcpy(&b, &to, 4);
      const std::uint32_t stride = std::max<std::uint32_t>(1, (b - a) / 500000);
      for (std::uint64_t u = a; u <= b; u += stride) {
        float f;
        const std::uint32_t u32 = static_cast<std::uint32_t>(u);
        std::memcpy(&f, &u32, 4);
        xs.push_back(f);
      }
    };
    if (c.lo < 0) {
      walk(0.0f, -c.lo);
      for (float& v : xs) v = -v;
    }
    walk(c.lo > 0 ? c.lo : 0.0f, c.hi);
    const std::int64_t n = static_cast<std::int64_t>(xs.size());
    std::vector<float> y(xs.size());
    const std::int64_t shape[] = {n}, one[] = {1};
    unary(c.op, shape, {xs.data(), DType::f32, one}, y.data(), DType::f32);
    double worst = 0;
    float worst_x = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double exact = c.exact(xs[i]);
      if (!std::isfinite(exact) || std::fabs(exact) > 3.4028234663852886e38) continue;
      const double err = ulp_error(y[i], exact);
      if (err > worst) {
        worst = err;
        worst_x = xs[i];
      }
    }
    EXPECT_LE(worst, c.max_ulp) << name(c.op) << " worst at x=" << worst_x;
    RecordProperty(std::string(name(c.op)) + "_max_ulp", std::to_string(worst));
  }
}

TEST(ElementwiseDispatch, VerboseLogSaysWhyTheReferenceRan) {
  const float x[6] = {1, 2, 3, 4, 5, 6};
  float y[6];
  const std::int64_t shape[] = {2, 3}, contiguous[] = {3, 1}, transposed[] = {1, 2};
  set_verbose(true);
  testing::internal::CaptureStderr();
  unary(UnaryOp::exp, shape, {x, DType::f32, contiguous}, y, DType::f32);
  unary(UnaryOp::exp, shape, {x, DType::f32, transposed}, y, DType::f32);
  const std::string log = testing::internal::GetCapturedStderr();
  set_verbose(false);
  if (max_isa() >= Isa::avx512) {
    EXPECT_NE(log.find("mixprec: exp f32: ran avx512\n"), std::string::npos) << log;
    EXPECT_NE(log.find("mixprec: exp f32: ran reference; skipped: avx512: input not contiguous"),
              std::string::npos)
        << log;
  } else {
    EXPECT_NE(log.find("mixprec: exp f32: ran reference; skipped: avx512"), std::string::npos)
        << log;
  }
}

TEST(ElementwiseErrors, ShapeMismatchThrowsShapeError) {
  const float x[4] = {1, 2, 3, 4};
  float y[4];
  const std::int64_t shape[] = {2, 2}, strides[] = {1};
  EXPECT_THROW(unary(UnaryOp::neg, shape, {x, DType::f32, strides}, y, DType::f32), ShapeError);
  EXPECT_THROW(ref::unary(UnaryOp::neg, shape, {x, DType::f32, strides}, y, DType::f32),
               ShapeError);
}

}  // namespace
}  // namespace mixprec::kernels
