// fp8_linear (mixprec/ops/fp8_linear.h). Finite differences do not apply to a quantised op, so:
//  - against a double-precision emulation of the same recipe (scales from the amax, each
//    operand rounded by numerics/formats.h's independent quantiser with the saturating rule,
//    products and sums in double), within f32 accumulation's bound (ops/f32_gemm_reference.h):
//    the quantisation error is far larger than that bound, so skipping a quantisation fails;
//  - with values exactly representable at their scales and GEMMs whose sums are exact, the
//    forward and all three gradients equal the plain f32 linear's bit for bit (also when only
//    dx or only dw is needed, and dy's cast writes only the copy that GEMM reads);
//  - the state's transitions: delayed scaling casts with the previous steps' scale, current
//    scaling with this step's, a NaN/Inf amax raises found_inf and leaves the scale, an amax
//    that grows 100x saturates instead of overflowing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/numerics/formats.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/fp8_linear.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/tensor/tensor.h"
#include "ops/f32_gemm_reference.h"

namespace mixprec {
namespace {

using runtime::Fp8Recipe;
using runtime::Fp8Scaling;

const numerics::FormatInfo& fmt_info(DType fmt) {
  return numerics::format_info(fmt == DType::f8e4m3 ? numerics::Format::fp8_e4m3
                                                    : numerics::Format::fp8_e5m2);
}

/// The scale of the recipe from a finite positive amax: 2^(floor(log2(max / amax)) - margin).
double oracle_scale(double amax, double max, int margin) {
  int k = 0;
  while (amax * std::ldexp(1.0, k) > max) --k;
  while (amax * std::ldexp(1.0, k + 1) <= max) ++k;
  return std::ldexp(1.0, k - margin);
}

/// v quantised at `scale` and dequantised, in double: sat(round(v * scale)) / scale.
std::vector<double> fake_quant(const std::vector<float>& v, double scale, DType fmt) {
  const numerics::FormatInfo& f = fmt_info(fmt);
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double s = std::max(-f.max, std::min(f.max, static_cast<double>(v[i]) * scale));
    out[i] = numerics::quantize(s, f) / scale;
  }
  return out;
}

double amax_of(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

std::vector<float> randn(std::size_t n, std::uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

/// Transposes a [r, c] row-major matrix.
std::vector<double> transpose(const std::vector<double>& a, std::int64_t r, std::int64_t c) {
  std::vector<double> t(a.size());
  for (std::int64_t i = 0; i < r; ++i) {
    for (std::int64_t j = 0; j < c; ++j) {
      t[static_cast<std::size_t>(j * r + i)] = a[static_cast<std::size_t>(i * c + j)];
    }
  }
  return t;
}

/// Runs one step of fp8_linear (forward and backward of sum(y * g)) and checks every output
/// against the double emulation with the scales the recipe must have chosen.
void check_step_against_emulation(Fp8LinearState& st, const std::vector<float>& xv,
                                  const std::vector<float>& wv, const std::vector<float>& bv,
                                  const std::vector<float>& gv, std::int64_t m, std::int64_t k,
                                  std::int64_t n, double sx, double sw, double sg) {
  Tensor x = Tensor::from_vector(xv, {m, k}).set_requires_grad();
  Tensor w = Tensor::from_vector(wv, {n, k}).set_requires_grad();
  Tensor b = Tensor::from_vector(bv, {n}).set_requires_grad();
  const Tensor g = Tensor::from_vector(gv, {m, n});
  Tensor y = fp8_linear(x, w, b, st);
  sum(y * g).backward();
  const Fp8Recipe& r = st.recipe;
  const std::vector<double> xq = fake_quant(xv, sx, r.forward_format());
  const std::vector<double> wq = fake_quant(wv, sw, r.forward_format());
  const std::vector<double> gq = fake_quant(gv, sg, r.grad_format());
  std::vector<double> want, mag;
  test::ref_matmul(xq, transpose(wq, n, k), m, k, n, want, mag);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      want[static_cast<std::size_t>(i * n + j)] += bv[static_cast<std::size_t>(j)];
      mag[static_cast<std::size_t>(i * n + j)] += std::fabs(bv[static_cast<std::size_t>(j)]);
    }
  }
  test::expect_f32_accumulation(y.to_vector(), want, mag, k + 1, "y");  // the bias: one term more
  test::ref_matmul(gq, wq, m, n, k, want, mag);  // dx = g_q w_q
  test::expect_f32_accumulation(x.grad().to_vector(), want, mag, n, "dx");
  test::ref_matmul(transpose(gq, m, n), xq, n, m, k, want, mag);  // dw = g_q^T x_q
  test::expect_f32_accumulation(w.grad().to_vector(), want, mag, m, "dw");
  std::vector<double> db(static_cast<std::size_t>(n), 0.0), dbmag(db.size(), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      db[static_cast<std::size_t>(j)] += gv[static_cast<std::size_t>(i * n + j)];  // unquantised
      dbmag[static_cast<std::size_t>(j)] += std::fabs(gv[static_cast<std::size_t>(i * n + j)]);
    }
  }
  test::expect_f32_accumulation(b.grad().to_vector(), db, dbmag, m, "db");
}

TEST(Fp8Linear, CurrentScalingMatchesTheDoubleEmulation) {
  const std::int64_t m = 24, k = 40, n = 12;
  Fp8Recipe r;
  r.scaling = Fp8Scaling::current;
  r.margin = 1;
  Fp8LinearState st(r);
  const auto xv = randn(m * k, 1, 3.0f), wv = randn(n * k, 2, 0.05f), bv = randn(n, 3, 1.0f);
  const auto gv = randn(m * n, 4, 1e-4f);
  check_step_against_emulation(st, xv, wv, bv, gv, m, k, n, oracle_scale(amax_of(xv), 448, 1),
                               oracle_scale(amax_of(wv), 448, 1),
                               oracle_scale(amax_of(gv), 57344, 1));
  EXPECT_EQ(st.found_inf.item(), 0.0f);
}

TEST(Fp8Linear, DelayedScalingUsesThePreviousStepsAmax) {
  const std::int64_t m = 16, k = 32, n = 8;
  Fp8Recipe r;  // delayed, history 16, hybrid
  r.amax_history = 3;
  Fp8LinearState st(r);
  const auto w = randn(n * k, 12, 0.1f), b = randn(n, 13, 0.5f);
  // Step 1: every scale is the initial 1 (nothing measured yet).
  const auto x1 = randn(m * k, 10, 2.0f), g1 = randn(m * n, 14, 30.0f);
  check_step_against_emulation(st, x1, w, b, g1, m, k, n, 1.0, 1.0, 1.0);
  EXPECT_EQ(st.input.history.to_vector()[0], static_cast<float>(amax_of(x1)));
  EXPECT_EQ(st.grad.history.to_vector()[0], static_cast<float>(amax_of(g1)));
  // Step 2: the scales come from step 1's amaxes (and the weight's, the same both steps).
  const auto x2 = randn(m * k, 20, 0.5f), g2 = randn(m * n, 24, 0.01f);
  check_step_against_emulation(st, x2, w, b, g2, m, k, n, oracle_scale(amax_of(x1), 448, 0),
                               oracle_scale(amax_of(w), 448, 0),
                               oracle_scale(amax_of(g1), 57344, 0));
  // After step 2 the window holds both: the larger amax (step 1's) still decides.
  EXPECT_EQ(st.input.scale.item(), static_cast<float>(oracle_scale(amax_of(x1), 448, 0)));
}

TEST(Fp8Linear, RepresentableValuesGiveThePlainLinearBitForBit) {
  // x, w: integers of at most 4 significant bits times 2^-4 (E4M3 holds them at any scale the
  // recipe picks); dy: at most 3 bits (E5M2). Every product and sum is then exact in f32, so
  // any order of summation gives the same bits and a wrong scale, rounding or transposition
  // shows as a difference.
  const std::int64_t m = 8, k = 64, n = 16;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> i15(-15, 15), i7(-7, 7);
  std::vector<float> xv(m * k), wv(n * k), bv(n), gv(m * n);
  for (float& v : xv) v = static_cast<float>(i15(rng)) / 16.0f;
  for (float& v : wv) v = static_cast<float>(i15(rng)) / 16.0f;
  for (float& v : bv) v = static_cast<float>(i15(rng)) / 4.0f;
  for (float& v : gv) v = static_cast<float>(i7(rng)) / 64.0f;
  // Both gradients (dy's cast writes both copies), only dw (only the transposed one), only dx
  // (only the row-major one).
  const std::pair<bool, bool> needs[] = {{true, true}, {false, true}, {true, false}};
  for (Fp8Scaling scaling : {Fp8Scaling::current, Fp8Scaling::delayed}) {
    for (const auto& [x_grad, w_grad] : needs) {
      const std::string what = std::string(name(scaling)) + (x_grad ? " dx" : "") + (w_grad ? " dw" : "");
      Fp8Recipe r;
      r.scaling = scaling;
      Fp8LinearState st(r);
      const Tensor g = Tensor::from_vector(gv, {m, n});
      Tensor x = Tensor::from_vector(xv, {2, m / 2, k}).set_requires_grad(x_grad);  // batched input
      Tensor w = Tensor::from_vector(wv, {n, k}).set_requires_grad(w_grad);
      Tensor b = Tensor::from_vector(bv, {n}).set_requires_grad();
      Tensor y = fp8_linear(x, w, b, st);
      sum(y * g.reshape({2, m / 2, n})).backward();
      Tensor x0 = Tensor::from_vector(xv, {2, m / 2, k}).set_requires_grad(x_grad);
      Tensor w0 = Tensor::from_vector(wv, {n, k}).set_requires_grad(w_grad);
      Tensor b0 = Tensor::from_vector(bv, {n}).set_requires_grad();
      Tensor y0 = linear(x0, w0, b0);
      sum(y0 * g.reshape({2, m / 2, n})).backward();
      EXPECT_EQ(y.shape(), y0.shape());
      EXPECT_EQ(y.to_vector(), y0.to_vector()) << what;
      if (x_grad) {
        EXPECT_EQ(x.grad().to_vector(), x0.grad().to_vector()) << what;
      }
      if (w_grad) {
        EXPECT_EQ(w.grad().to_vector(), w0.grad().to_vector()) << what;
      }
      EXPECT_EQ(b.grad().to_vector(), b0.grad().to_vector()) << what;
    }
  }
}

TEST(Fp8Linear, NonFiniteAmaxIsReportedAndDoesNotPoisonTheScale) {
  for (Fp8Scaling scaling : {Fp8Scaling::current, Fp8Scaling::delayed}) {
    Fp8Recipe r;
    r.scaling = scaling;
    Fp8LinearState st(r);
    std::vector<float> xv = randn(4 * 8, 3, 1.0f);
    const Tensor w = Tensor::from_vector(randn(2 * 8, 4, 0.3f), {2, 8});
    fp8_linear(Tensor::from_vector(xv, {4, 8}), w, Tensor(), st);
    const float scale = st.input.scale.item();
    const std::vector<float> history = st.input.history.to_vector();
    xv[5] = std::numeric_limits<float>::infinity();
    fp8_linear(Tensor::from_vector(xv, {4, 8}), w, Tensor(), st);
    EXPECT_EQ(st.found_inf.item(), 1.0f) << name(scaling);
    EXPECT_EQ(st.input.scale.item(), scale);
    EXPECT_EQ(st.input.history.to_vector(), history);
  }
}

TEST(Fp8Linear, AmaxGrowing100xSaturatesWithoutNaN) {
  Fp8Recipe r;  // delayed: the scale lags the growth by a step
  Fp8LinearState st(r);
  const Tensor w = Tensor::from_vector(randn(4 * 16, 5, 0.2f), {4, 16});
  for (float sd : {1.0f, 10.0f, 100.0f, 100.0f}) {
    Tensor x = Tensor::from_vector(randn(8 * 16, 6, sd), {8, 16}).set_requires_grad();
    Tensor y = fp8_linear(x, w, Tensor(), st);
    sum(y * y).backward();
    for (float v : y.to_vector()) ASSERT_TRUE(std::isfinite(v)) << "sd " << sd;
    for (float v : x.grad().to_vector()) ASSERT_TRUE(std::isfinite(v)) << "sd " << sd;
  }
  EXPECT_EQ(st.found_inf.item(), 0.0f);
}

TEST(Fp8Linear, AutocastReturnsTheAutocastDtype) {
  Fp8LinearState st(Fp8Recipe{});
  runtime::Autocast on(true, DType::bf16);
  const Tensor y = fp8_linear(Tensor::from_vector(randn(6, 8, 1.0f), {2, 3}),
                              Tensor::from_vector(randn(6, 9, 1.0f), {2, 3}), Tensor(), st);
  EXPECT_EQ(y.dtype(), DType::bf16);
}

TEST(Fp8Linear, WithoutABackwardTheOutputAndStateAreTheSame) {
  // Under no_grad (evaluation) the casts write no transposed copies; the output, the amaxes and
  // the scales must not notice.
  const std::int64_t m = 20, k = 36, n = 10;
  const auto xv = randn(m * k, 31, 2.0f), wv = randn(n * k, 32, 0.1f), bv = randn(n, 33, 0.5f);
  const auto run = [&](bool grad) {
    Fp8Recipe r;
    r.amax_history = 2;
    Fp8LinearState st(r);
    Tensor x = Tensor::from_vector(xv, {m, k}).set_requires_grad(grad);
    Tensor w = Tensor::from_vector(wv, {n, k}).set_requires_grad(grad);
    const Tensor b = Tensor::from_vector(bv, {n});
    std::vector<float> out;
    for (int step = 0; step < 2; ++step) {  // the second step uses the first's amax
      const Tensor y = fp8_linear(x, w, b, st);
      EXPECT_EQ(y.requires_grad(), grad);
      out = y.to_vector();
    }
    return std::make_pair(out, std::make_pair(st.input.history.to_vector(), st.weight.scale.to_vector()));
  };
  const auto with_grad = run(true);
  {
    runtime::NoGradGuard no_grad;
    const auto without = run(false);
    EXPECT_EQ(without.first, with_grad.first);
    EXPECT_EQ(without.second, with_grad.second);
  }
  EXPECT_EQ(run(false).first, with_grad.first);  // no input requires grad: no backward either
}

TEST(Fp8Linear, BadRecipesAndShapesAreRefused) {
  Fp8Recipe r;
  r.amax_history = 0;
  EXPECT_THROW(Fp8LinearState{r}, ValueError);
  r.amax_history = 4;
  r.margin = -1;
  EXPECT_THROW(Fp8LinearState{r}, ValueError);
  EXPECT_THROW(runtime::parse_fp8_formats("e5m2"), ValueError);
  Fp8LinearState st(Fp8Recipe{});
  EXPECT_THROW(fp8_linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), Tensor(), st), ShapeError);
}

// Observed casts count what the saturating cast clipped and what it flushed: delayed scaling's
// first step casts with scale 1, so 1000 and -500 are beyond E4M3's 448 (2 of 6 elements) and
// 1e-4 is below half its smallest subnormal 2^-9 (1 of the 5 nonzero elements). Without
// observe nothing is counted.
TEST(Fp8Linear, ObservedCastsCountSaturatedAndFlushedElements) {
  const Tensor x = Tensor::from_vector({1000.0f, -500.0f, 1.0f, 1e-4f, 0.0f, 3.0f}, {3, 2});
  const Tensor w = Tensor::from_vector({1.0f, 0.5f, -0.25f, 2.0f}, {2, 2}).set_requires_grad();
  Fp8LinearState watched(runtime::Fp8Recipe{});
  watched.observe = true;
  sum(fp8_linear(x, w, Tensor(), watched)).backward();
  const std::vector<float> in = watched.input.observed.to_vector();
  EXPECT_FLOAT_EQ(in[0], 2.0f / 6.0f);
  EXPECT_FLOAT_EQ(in[1], 1.0f / 5.0f);
  EXPECT_EQ(in[2], 1.0f);
  EXPECT_EQ(watched.weight.observed.to_vector(), (std::vector<float>{0.0f, 0.0f, 1.0f}));
  EXPECT_EQ(watched.grad.observed.to_vector(), (std::vector<float>{0.0f, 0.0f, 1.0f}));  // dy = 1
  Fp8LinearState plain(runtime::Fp8Recipe{});
  sum(fp8_linear(x, w, Tensor(), plain)).backward();
  EXPECT_EQ(plain.input.observed.to_vector(), (std::vector<float>{0.0f, 0.0f, 0.0f}));
  EXPECT_EQ(plain.grad.observed.to_vector(), (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

}  // namespace
}  // namespace mixprec
