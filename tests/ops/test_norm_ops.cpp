// batch_norm / layer_norm ops: gradients against double-precision finite differences, the
// running-statistics update, dtypes under autocast, and argument errors.
#include <cmath>

#include "gradcheck.h"
#include "mixprec/ops/normalization.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

/// Double batch norm of x viewed as [n, c, s]; training uses the batch statistics (biased
/// variance), eval the given running ones. w/b empty: no affine.
VecD bn_ref(const VecD& x, std::int64_t n, std::int64_t c, std::int64_t s, bool training,
            const VecD& rm, const VecD& rv, const VecD& w, const VecD& b, double eps = 1e-5) {
  VecD y(x.size());
  for (std::int64_t k = 0; k < c; ++k) {
    auto at = [&](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>((i * c + k) * s + j); };
    double mean = rm[k], var = rv[k];
    if (training) {
      double sum = 0, sq = 0;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < s; ++j) sum += x[at(i, j)];
      mean = sum / static_cast<double>(n * s);
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < s; ++j) sq += (x[at(i, j)] - mean) * (x[at(i, j)] - mean);
      var = sq / static_cast<double>(n * s);
    }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < s; ++j) {
        const double xhat = (x[at(i, j)] - mean) / std::sqrt(var + eps);
        y[at(i, j)] = xhat * (w.empty() ? 1.0 : w[k]) + (b.empty() ? 0.0 : b[k]);
      }
  }
  return y;
}

void gradcheck_bn(const Shape& shape, bool training, bool affine) {
  const std::int64_t n = shape[0], c = shape[1], total = numel(shape);
  const std::int64_t s = total / (n * c);
  const std::vector<float> rm = random_values(static_cast<std::size_t>(c), 7, -0.5f, 0.5f);
  const std::vector<float> rv = random_values(static_cast<std::size_t>(c), 8, 0.5f, 2.0f);
  std::vector<GradcheckInput> inputs = {{shape, random_values(static_cast<std::size_t>(total), 9)}};
  if (affine) {
    inputs.push_back({{c}, random_values(static_cast<std::size_t>(c), 10, 0.5f, 1.5f)});
    inputs.push_back({{c}, random_values(static_cast<std::size_t>(c), 11)});
  }
  gradcheck(
      [&](const Ts& t) {
        Tensor mean = Tensor::from_vector(rm, {c}), var = Tensor::from_vector(rv, {c});
        return batch_norm(t[0], mean, var, affine ? t[1] : Tensor(), affine ? t[2] : Tensor(),
                          training);
      },
      [&](const Vs& v) {
        return bn_ref(v[0], n, c, s, training, VecD(rm.begin(), rm.end()),
                      VecD(rv.begin(), rv.end()), affine ? v[1] : VecD(), affine ? v[2] : VecD());
      },
      inputs);
}

TEST(BatchNormOpTest, GradcheckTraining4d) {
  gradcheck_bn({3, 2, 2, 3}, true, true);
  gradcheck_bn({2, 3, 4, 5}, true, false);  // rows of 20: the vector path
}
TEST(BatchNormOpTest, GradcheckEval4d) { gradcheck_bn({3, 2, 2, 3}, false, true); }
TEST(BatchNormOpTest, GradcheckTraining2d) { gradcheck_bn({5, 3}, true, true); }
TEST(BatchNormOpTest, GradcheckEval2d) { gradcheck_bn({5, 3}, false, true); }

TEST(BatchNormOpTest, RunningStatsFollowPyTorchRule) {
  // Channel 0 holds 1, 2, 3, 6 and channel 1 holds 0, 0, 4, 4 over n = 2, s = 2.
  const Tensor x = Tensor::from_vector({1, 2, 0, 0, 3, 6, 4, 4}, {2, 2, 1, 2});
  Tensor rm = Tensor::from_vector({0.5f, -1.0f}, {2});
  Tensor rv = Tensor::from_vector({1.0f, 2.0f}, {2});
  const std::uint64_t v0 = rm.version(), v1 = rv.version();
  const Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.25f, 0.0f);
  // Channel 0: mean 3, biased var (4+1+0+9)/4 = 3.5, unbiased 14/3.
  // Channel 1: mean 2, biased var 4, unbiased 16/3.
  const std::vector<float> m = rm.to_vector(), v = rv.to_vector();
  EXPECT_NEAR(m[0], 0.75 * 0.5 + 0.25 * 3.0, 1e-6);
  EXPECT_NEAR(m[1], 0.75 * -1.0 + 0.25 * 2.0, 1e-6);
  EXPECT_NEAR(v[0], 0.75 * 1.0 + 0.25 * 14.0 / 3.0, 1e-6);
  EXPECT_NEAR(v[1], 0.75 * 2.0 + 0.25 * 16.0 / 3.0, 1e-6);
  EXPECT_GT(rm.version(), v0);
  EXPECT_GT(rv.version(), v1);
  // The output is normalised with the biased variance.
  const std::vector<float> yv = y.to_vector();
  EXPECT_NEAR(yv[0], (1.0 - 3.0) / std::sqrt(3.5), 1e-6);
  EXPECT_NEAR(yv[2], (0.0 - 2.0) / 2.0, 1e-6);
}

TEST(BatchNormOpTest, EvalUsesRunningStatsAndLeavesThemAlone) {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  Tensor rm = Tensor::from_vector({1.0f, -1.0f}, {2});
  Tensor rv = Tensor::from_vector({4.0f, 0.25f}, {2});
  const Tensor w = Tensor::from_vector({2.0f, 1.0f}, {2});
  const Tensor b = Tensor::from_vector({0.5f, 0.0f}, {2});
  const Tensor y = batch_norm(x, rm, rv, w, b, false, 0.1f, 0.0f);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0.5f, 6.0f, 2.5f, 10.0f}));
  EXPECT_EQ(rm.to_vector(), (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(rv.to_vector(), (std::vector<float>{4.0f, 0.25f}));
}

TEST(BatchNormOpTest, HalfInputsKeepDtypeAndF32Stats) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor x = Tensor::randn({4, 3, 5, 5}, 3, dt, 2.0f, 3.0f);
    x.set_requires_grad(true);
    Tensor w = Tensor::ones({3});
    w.set_requires_grad(true);
    Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
    const Tensor y = batch_norm(x, rm, rv, w, Tensor::zeros({3}), true);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(rm.dtype(), DType::f32);
    EXPECT_EQ(rv.dtype(), DType::f32);
    // Running mean moved 10% of the way to the batch mean (about 2).
    EXPECT_NEAR(rm.to_vector()[0], 0.2, 0.05);
    y.backward(Tensor::ones(y.shape(), dt));
    EXPECT_EQ(x.grad().dtype(), dt);
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    // d sum(y) / dx = 0 in training (the mean subtraction removes a constant shift).
    for (float g : x.grad().to_vector()) EXPECT_NEAR(g, 0.0f, 1e-2f);
  }
}

TEST(BatchNormOpTest, AutocastPassesThrough) {
  runtime::Autocast ac(true, DType::bf16);
  Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
  const Tensor w = Tensor::ones({2}), b = Tensor::zeros({2});
  EXPECT_EQ(batch_norm(Tensor::randn({4, 2}, 1), rm, rv, w, b, true).dtype(), DType::f32);
  EXPECT_EQ(batch_norm(Tensor::randn({4, 2}, 1, DType::bf16), rm, rv, w, b, true).dtype(),
            DType::bf16);
}

TEST(BatchNormOpTest, BadInputsThrow) {
  Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
  const Tensor x = Tensor::randn({4, 3, 2, 2}, 1);
  try {
    batch_norm(Tensor::randn({1, 3, 1, 1}, 1), rm, rv, Tensor(), Tensor(), true);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Expected more than 1 value per channel"),
              std::string::npos);
  }
  // One value per channel is fine in eval mode.
  EXPECT_NO_THROW(batch_norm(Tensor::randn({1, 3, 1, 1}, 1), rm, rv, Tensor(), Tensor(), false));
  Tensor rm16 = Tensor::zeros({3}, DType::bf16);
  EXPECT_THROW(batch_norm(x, rm16, rv, Tensor(), Tensor(), true), DTypeError);
  Tensor rm4 = Tensor::zeros({4});
  EXPECT_THROW(batch_norm(x, rm4, rv, Tensor(), Tensor(), true), ShapeError);
  EXPECT_THROW(batch_norm(x, rm, rv, Tensor::ones({4}), Tensor(), true), ShapeError);
  EXPECT_THROW(batch_norm(Tensor::randn({4}, 1), rm, rv, Tensor(), Tensor(), true), ShapeError);
  Tensor none_m, none_v;
  EXPECT_THROW(batch_norm(x, none_m, none_v, Tensor(), Tensor(), false), ValueError);
  EXPECT_NO_THROW(batch_norm(x, none_m, none_v, Tensor(), Tensor(), true));  // no tracking
  EXPECT_THROW(batch_norm(x, rm, rv, Tensor(), Tensor(), true, 1.5f), ValueError);
  EXPECT_THROW(batch_norm(Tensor(), rm, rv, Tensor(), Tensor(), true), StateError);
}

VecD ln_ref(const VecD& x, std::int64_t cols, const VecD& w, const VecD& b) {
  VecD y(x.size());
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(cols); ++r) {
    const std::size_t base = r * static_cast<std::size_t>(cols);
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += x[base + j];
    mean /= static_cast<double>(cols);
    for (std::int64_t j = 0; j < cols; ++j) var += (x[base + j] - mean) * (x[base + j] - mean);
    var /= static_cast<double>(cols);
    for (std::int64_t j = 0; j < cols; ++j) {
      y[base + j] = (x[base + j] - mean) / std::sqrt(var + 1e-5) * (w.empty() ? 1.0 : w[j]) +
                    (b.empty() ? 0.0 : b[j]);
    }
  }
  return y;
}

TEST(LayerNormOpTest, Gradcheck) {
  // Last dimension, rows of 6 (reference path) and of 20 (vector statistics).
  for (std::int64_t cols : {6, 20}) {
    gradcheck([](const Ts& t) { return layer_norm(t[0], 1, t[1], t[2]); },
              [cols](const Vs& v) { return ln_ref(v[0], cols, v[1], v[2]); },
              {{{4, cols}, random_values(static_cast<std::size_t>(4 * cols), 21)},
               {{cols}, random_values(static_cast<std::size_t>(cols), 22, 0.5f, 1.5f)},
               {{cols}, random_values(static_cast<std::size_t>(cols), 23)}});
  }
  // Two normalised dimensions with [3, 4] parameters.
  gradcheck([](const Ts& t) { return layer_norm(t[0], 2, t[1], t[2]); },
            [](const Vs& v) { return ln_ref(v[0], 12, v[1], v[2]); },
            {{{2, 3, 4}, random_values(24, 24)},
             {{3, 4}, random_values(12, 25, 0.5f, 1.5f)},
             {{3, 4}, random_values(12, 26)}});
  // No affine.
  gradcheck([](const Ts& t) { return layer_norm(t[0], 1, Tensor(), Tensor()); },
            [](const Vs& v) { return ln_ref(v[0], 5, {}, {}); },
            {{{3, 5}, random_values(15, 27)}});
}

// fp32_to_lower: under autocast layer norm computes in f32 from any input dtype and stores the
// region's dtype, rounded once: bit for bit the f32 layer norm followed by a cast, forward and
// backward (the kernel widens the 16-bit gradient exactly as the cast's backward would).
TEST(LayerNormOpTest, AutocastStoresTheRegionsDtypeAsTheF32NormThenACast) {
  for (DType lower : {DType::bf16, DType::f16}) {
    for (DType in : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string("x ") + name(in) + ", region " + name(lower));
      const Tensor x0 = Tensor::randn({6, 48}, 5, in);
      const Tensor w0 = Tensor::uniform({48}, 7, 0.5f, 1.5f), b0 = Tensor::randn({48}, 8);
      const Tensor c = Tensor::randn({6, 48}, 9);  // weights of the loss, so every dy differs
      EXPECT_EQ(layer_norm(x0, 1, w0, b0).dtype(), in);  // outside autocast: x's dtype
      auto leaves = [&] {
        Ts t{x0.detach(), w0.detach(), b0.detach()};
        for (Tensor& l : t) l.set_requires_grad(true);
        return t;
      };
      Ts fused = leaves(), composed = leaves();
      Tensor y_fused, y_composed;
      {
        runtime::Autocast region(true, lower);
        y_fused = layer_norm(fused[0], 1, fused[1], fused[2]);
      }
      y_composed = layer_norm(composed[0].to(DType::f32), 1, composed[1], composed[2]).to(lower);
      ASSERT_EQ(y_fused.dtype(), lower);
      EXPECT_EQ(y_fused.to_vector(), y_composed.to_vector());
      sum(y_fused.to(DType::f32) * c).backward();
      sum(y_composed.to(DType::f32) * c).backward();
      for (int i = 0; i < 3; ++i) {
        SCOPED_TRACE(i == 0 ? "dx" : i == 1 ? "dweight" : "dbias");
        ASSERT_TRUE(fused[i].grad().defined());
        EXPECT_EQ(fused[i].grad().dtype(), composed[i].grad().dtype());
        EXPECT_EQ(fused[i].grad().to_vector(), composed[i].grad().to_vector());
      }
    }
  }
}

TEST(LayerNormOpTest, GradientDtypesFollowInputs) {
  Tensor x = Tensor::randn({3, 16}, 6, DType::bf16);
  x.set_requires_grad(true);
  Tensor w = Tensor::ones({16});
  w.set_requires_grad(true);
  const Tensor y = layer_norm(x, 1, w, Tensor());
  y.backward(Tensor::ones(y.shape(), DType::bf16));
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
}

TEST(LayerNormOpTest, BadInputsThrow) {
  const Tensor x = Tensor::randn({2, 3, 4}, 1);
  EXPECT_THROW(layer_norm(x, 0, Tensor(), Tensor()), ValueError);
  EXPECT_THROW(layer_norm(x, 4, Tensor(), Tensor()), ValueError);
  EXPECT_THROW(layer_norm(x, 1, Tensor::ones({3}), Tensor()), ShapeError);
  EXPECT_THROW(layer_norm(x, 2, Tensor::ones({12}), Tensor()), ShapeError);
  EXPECT_THROW(layer_norm(x, 1, Tensor(), Tensor(), -1.0f), ValueError);
  EXPECT_THROW(layer_norm(Tensor::zeros({2, 0}), 1, Tensor(), Tensor()), ShapeError);
}

// add_layer_norm: the residual step of a pre-norm transformer. Gradients of both outputs (the
// sum and its norm) against double finite differences.
TEST(AddLayerNormOpTest, Gradcheck) {
  for (std::int64_t cols : {6, 20}) {
    gradcheck(
        [](const Ts& t) {
          const ResidualNorm r = add_layer_norm(t[0], t[1], 1, t[2], t[3]);
          return add(r.sum, r.normalized);
        },
        [cols](const Vs& v) {
          VecD s(v[0].size());
          for (std::size_t i = 0; i < s.size(); ++i) s[i] = v[0][i] + v[1][i];
          VecD y = ln_ref(s, cols, v[2], v[3]);
          for (std::size_t i = 0; i < s.size(); ++i) y[i] += s[i];
          return y;
        },
        {{{4, cols}, random_values(static_cast<std::size_t>(4 * cols), 31)},
         {{4, cols}, random_values(static_cast<std::size_t>(4 * cols), 32)},
         {{cols}, random_values(static_cast<std::size_t>(cols), 33, 0.5f, 1.5f)},
         {{cols}, random_values(static_cast<std::size_t>(cols), 34)}});
  }
}

// The fused op against add() then layer_norm(), bit for bit: both outputs, their dtypes, and
// the gradients of all four inputs, outside autocast and in bf16 and f16 regions, with the
// transformer's f32 residual stream meeting a 16-bit delta and with equal dtypes.
TEST(AddLayerNormOpTest, EqualsTheAddThenTheNormBitForBit) {
  struct Case {
    bool autocast;
    DType lower, x, delta;
  };
  const Case cases[] = {{false, DType::bf16, DType::f32, DType::f32},
                        {false, DType::bf16, DType::f32, DType::bf16},
                        {true, DType::bf16, DType::f32, DType::bf16},
                        {true, DType::f16, DType::f32, DType::f16},
                        {true, DType::bf16, DType::bf16, DType::bf16},
                        {true, DType::bf16, DType::bf16, DType::f16}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.autocast ? "region " : "no region ") + name(k.lower) + ", x " +
                 name(k.x) + ", delta " + name(k.delta));
    const Tensor x0 = Tensor::randn({6, 48}, 41, k.x), d0 = Tensor::randn({6, 48}, 42, k.delta);
    const Tensor w0 = Tensor::uniform({48}, 43, 0.5f, 1.5f), b0 = Tensor::randn({48}, 44);
    const Tensor c1 = Tensor::randn({6, 48}, 45), c2 = Tensor::randn({6, 48}, 46);
    auto leaves = [&] {
      Ts t{x0.detach(), d0.detach(), w0.detach(), b0.detach()};
      for (Tensor& l : t) l.set_requires_grad(true);
      return t;
    };
    Ts fused = leaves(), composed = leaves();
    ResidualNorm f, c;
    {
      runtime::Autocast region(k.autocast, k.lower);
      f = add_layer_norm(fused[0], fused[1], 1, fused[2], fused[3]);
      c.sum = add(composed[0], composed[1]);
      c.normalized = layer_norm(c.sum, 1, composed[2], composed[3]);
    }
    ASSERT_EQ(f.sum.dtype(), c.sum.dtype());
    ASSERT_EQ(f.normalized.dtype(), c.normalized.dtype());
    EXPECT_EQ(f.sum.to_vector(), c.sum.to_vector());
    EXPECT_EQ(f.normalized.to_vector(), c.normalized.to_vector());
    (sum(f.normalized.to(DType::f32) * c1) + sum(f.sum.to(DType::f32) * c2)).backward();
    (sum(c.normalized.to(DType::f32) * c1) + sum(c.sum.to(DType::f32) * c2)).backward();
    for (int i = 0; i < 4; ++i) {
      SCOPED_TRACE(i == 0 ? "dx" : i == 1 ? "ddelta" : i == 2 ? "dweight" : "dbias");
      ASSERT_TRUE(fused[i].grad().defined());
      EXPECT_EQ(fused[i].grad().dtype(), composed[i].grad().dtype());
      EXPECT_EQ(fused[i].grad().to_vector(), composed[i].grad().to_vector());
    }
  }
}

TEST(AddLayerNormOpTest, BroadcastDeltaIsAddedApartAndBadInputsThrow) {
  const Tensor x = Tensor::randn({3, 8}, 51), d = Tensor::randn({8}, 52);
  const Tensor w = Tensor::ones({8}), b = Tensor::zeros({8});
  const ResidualNorm r = add_layer_norm(x, d, 1, w, b);
  EXPECT_EQ(r.sum.to_vector(), add(x, d).to_vector());
  EXPECT_EQ(r.normalized.to_vector(), layer_norm(add(x, d), 1, w, b).to_vector());
  EXPECT_THROW(add_layer_norm(x, Tensor(), 1, w, b), StateError);
  EXPECT_THROW(add_layer_norm(x, x.to(DType::f8e4m3), 1, w, b), DTypeError);
  EXPECT_THROW(add_layer_norm(x, x, 2, w, b), ShapeError);
  EXPECT_THROW(add_layer_norm(x, x, 1, w, b, -1.0f), ValueError);
}

}  // namespace
}  // namespace mixprec::testing
