// The ulp bounds of the transcendental functions (kernels/elementwise.h, the op list's simd
// and ref columns), measured against double precision for the vector code at every SIMD level
// this CPU supports and for the reference itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels {
namespace {

/// Distance in f32 ulps (of the exact value) between a float result and an exact double;
/// ulps of subnormal results are 2^-149.
double ulp_error(float got, double exact) {
  const double a = std::fabs(exact);
  int e = 0;
  std::frexp(a, &e);
  const double ulp = a < 1.1754943508222875e-38 ? std::ldexp(1.0, -149) : std::ldexp(1.0, e - 24);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

/// Floats from lo to hi (lo < hi), dense: every `stride`-th bit pattern of each sign's range,
/// ~1M points per op, plus the end points.
std::vector<float> sweep(float lo, float hi) {
  std::vector<float> xs;
  auto walk = [&](float from, float to, bool negate) {  // 0 <= from < to, in magnitude
    std::uint32_t a = 0, b = 0;
    std::memcpy(&a, &from, 4);
    std::memcpy(&b, &to, 4);
    const std::uint32_t stride = std::max<std::uint32_t>(1, (b - a) / 500000);
    for (std::uint64_t u = a; u <= b; u += stride) {
      float f;
      const auto u32 = static_cast<std::uint32_t>(u);
      std::memcpy(&f, &u32, 4);
      xs.push_back(negate ? -f : f);
    }
    float end = negate ? -to : to;
    xs.push_back(end);
  };
  if (lo < 0) walk(0.0f, -lo, true);
  if (hi > 0) walk(lo > 0 ? lo : 0.0f, hi, false);
  return xs;
}

// The ulp bounds of kernels/elementwise.h, measured against double precision on ~1M floats
// spread over each function's domain, for the vector code at EVERY Highway target this CPU
// runs and for the reference (glibc's expf/logf/tanhf/erfcf) itself.
TEST(ElementwiseVecMath, AccuracyAgainstDoublePrecision) {
  struct Case {
    UnaryOp op;
    float lo, hi;
    double (*exact)(double x);
  };
  const Case cases[] = {
      {UnaryOp::exp, -110.0f, 89.0f, [](double x) { return std::exp(x); }},
      {UnaryOp::log, 1e-45f, 3.4e38f, [](double x) { return std::log(x); }},
      {UnaryOp::tanh, -3.4e38f, 3.4e38f, [](double x) { return std::tanh(x); }},
      // Below -88.72, e^-x overflows f32 and both implementations return 0 (abs error
      // < 2^-127): the bound holds from there up.
      {UnaryOp::sigmoid, -88.7f, 3.4e38f, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      // gelu as the kernels define it: z = -x/sqrt2 rounded to f32 first, then exact.
      {UnaryOp::gelu, -30.0f, 3e38f, [](double x) {
         const float z = -static_cast<float>(x) * 0.70710678118654752f;
         return 0.5 * x * std::erfc(static_cast<double>(z));
       }},
      // gelu_tanh as the kernels define it: w = x (c1 + c2 x^2) in f32 operations (the same
      // bits everywhere), then x / (1 + e^-w) exact. Below -10.07 e^-w overflows f32 and all
      // give -0 (abs error < 2^-124).
      {UnaryOp::gelu_tanh, -10.0f, 3.4e38f, [](double x) {
         // volatile: each step rounded to f32, never fused (this file may build with FMA).
         const float xf = static_cast<float>(x);
         volatile float t = xf * xf;
         t = 0.071354816272600249f * t;
         t = 1.5957691216057308f + t;
         const float w = xf * t;
         return x / (1.0 + std::exp(-static_cast<double>(w)));
       }},
      // silu = x sigmoid(x). Below -87.3 e^-|x| is subnormal and loses bits (abs error
      // < 2^-120 there, where x / (1 + e^-x) would give -0 below -88.72): the bound holds above.
      {UnaryOp::silu, -87.3f, 3.4e38f, [](double x) { return x / (1.0 + std::exp(-x)); }},
  };
  // Every op the list gives an ulp bound is measured here.
  for (const UnaryOpInfo& i : kUnaryOps) {
    const UnaryOp op = i.op;
    if (i.simd_ulps == 0.0) continue;  // exact: bit-identical to the reference
    EXPECT_TRUE(std::any_of(std::begin(cases), std::end(cases),
                            [&](const Case& c) { return c.op == op; }))
        << name(op) << " has an ulp bound in the op list but no exact function here";
  }
  for (const Case& c : cases) {
    const std::vector<float> xs = sweep(c.lo, c.hi);
    const std::int64_t n = static_cast<std::int64_t>(xs.size());
    const std::int64_t shape[] = {n}, one[] = {1};
    auto measure = [&](const std::vector<float>& y, const std::string& who, double bound) {
      double worst = 0;
      float worst_x = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double exact = c.exact(xs[i]);
        if (!std::isfinite(exact) || std::fabs(exact) > 3.4028234663852886e38) {
          EXPECT_TRUE(std::isinf(y[i]) || exact != exact) << who << " x=" << xs[i];
          continue;
        }
        const double err = ulp_error(y[i], exact);
        if (err > worst) {
          worst = err;
          worst_x = xs[i];
        }
      }
      EXPECT_LE(worst, bound) << name(c.op) << " " << who << " worst at x=" << worst_x;
      std::printf("[ ulp      ] %-8s %-10s max %.3f ulp at x=%.9g (bound %.2f)\n", name(c.op),
                  who.c_str(), worst, static_cast<double>(worst_x), bound);
      RecordProperty(std::string(name(c.op)) + "_" + who + "_max_ulp", std::to_string(worst));
    };
    std::vector<float> y(xs.size());
    ref::unary(c.op, shape, {xs.data(), DType::f32, one}, y.data(), DType::f32);
    measure(y, "ref", info(c.op).ref_ulps);
    for (Isa isa : ktest::isas_to_test()) {
      ktest::IsaCap cap(isa);
      cpu::unary(c.op, shape, {xs.data(), DType::f32, one}, y.data(), DType::f32);
      measure(y, simd_target(), info(c.op).simd_ulps);
    }
  }
}

}  // namespace
}  // namespace mixprec::kernels
