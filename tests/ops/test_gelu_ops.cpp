// gelu's two forms through the frontend: the tanh approximation against PyTorch's formula in
// double (f32, bf16, f16), that it is a different function from the exact (erf) default, its
// gradient dtype, and nn::GELU's choice of form. Kernel accuracy on every SIMD target is in
// tests/kernels/test_elementwise.cpp; the gradient by finite differences in
// tests/runtime/test_gradcheck_ops.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

/// PyTorch's approximate='tanh' formula 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
/// in double, as x / (1 + e^-2u): the same function, but 1 + tanh(u) cancels to nothing in the
/// negative tail even in double (x = -9 would give 0, the true value is -1.3e-28).
double gelu_tanh_ref(double x) {
  const double u = std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

double gelu_erf_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

TEST(GeluTanh, MatchesPyTorchsFormulaInEveryDtype) {
  const std::vector<float> xs = {-9.0f, -5.0f, -3.0f, -1.5f, -0.75f, -0.1f, 0.0f,
                                 1e-3f, 0.5f,  1.0f,  2.0f,  4.0f,  8.0f,  30.0f};
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const Tensor x = Tensor::from_vector(xs, {static_cast<std::int64_t>(xs.size())}, dt);
    const Tensor y = gelu(x, GeluApproximation::tanh);
    ASSERT_EQ(y.dtype(), dt);
    const std::vector<float> xv = x.to_vector(), yv = y.to_vector();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double want = gelu_tanh_ref(xv[i]);  // at the input as rounded to dt
      // f32: a few ulps (plus the rounding of w, relative |w| eps, large only in the far
      // negative tail); 16-bit: one rounding of the output, which may underflow (f16 at -9).
      const double tol = dt == DType::f32
                             ? std::fabs(want) * 4e-6 + 1e-30
                             : std::fabs(want) * traits(dt).epsilon + traits(dt).min_subnormal;
      EXPECT_NEAR(yv[i], want, tol) << name(dt) << " x=" << xv[i];
    }
  }
}

TEST(GeluTanh, IsNotTheExactGelu) {
  // At x = +-1 the forms differ by 1.5e-4, far above f32 rounding: a swap would fail here.
  const Tensor x = Tensor::from_vector({1.0f, -1.0f}, {2});
  const std::vector<float> approx = gelu(x, GeluApproximation::tanh).to_vector();
  const std::vector<float> exact = gelu(x).to_vector();
  const std::vector<float> exact_named = gelu(x, GeluApproximation::none).to_vector();
  EXPECT_NEAR(approx[0], gelu_tanh_ref(1.0), 1e-6);
  EXPECT_NEAR(exact[0], gelu_erf_ref(1.0), 1e-6);
  EXPECT_GT(std::fabs(approx[0] - exact[0]), 1e-4);
  EXPECT_GT(std::fabs(approx[1] - exact[1]), 1e-4);
  EXPECT_EQ(exact, exact_named);
}

TEST(GeluTanh, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector({inf, nan, -50.0f, 0.0f}, {4});
  const std::vector<float> y = gelu(x, GeluApproximation::tanh).to_vector();
  EXPECT_EQ(y[0], inf);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 0.0f);  // the true value, -50 e^-(~360), underflows
  EXPECT_EQ(y[3], 0.0f);
}

TEST(GeluTanh, GradientKeepsTheInputDtypeAndIsOneAndZeroInTheTails) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Tensor x = Tensor::from_vector({-20.0f, -0.7525f, 0.0f, 20.0f}, {4}, dt);
    x.set_requires_grad(true);
    sum(gelu(x, GeluApproximation::tanh)).backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().dtype(), dt);
    const std::vector<float> g = x.grad().to_vector();
    EXPECT_EQ(g[0], 0.0f) << name(dt);
    EXPECT_NEAR(g[1], 0.0f, 2e-3) << name(dt);  // the gradient's zero, near -0.7525
    EXPECT_EQ(g[2], 0.5f) << name(dt);          // s(0) = 1/2 exactly
    EXPECT_EQ(g[3], 1.0f) << name(dt);
  }
}

TEST(GeluTanh, ModuleUsesTheChosenForm) {
  const Tensor x = Tensor::from_vector({1.0f}, {1});
  nn::GELU exact_layer, tanh_layer(GeluApproximation::tanh);
  EXPECT_EQ(exact_layer.approximate(), GeluApproximation::none);
  EXPECT_NEAR(exact_layer.forward(x).item(), gelu_erf_ref(1.0), 1e-6);
  EXPECT_NEAR(tanh_layer.forward(x).item(), gelu_tanh_ref(1.0), 1e-6);
}

}  // namespace
}  // namespace mixprec
