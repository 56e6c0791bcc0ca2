// gelu_mlp: Linear, GELU(tanh), Linear as one op with the GELU and its gradient in the GEMMs'
// epilogues. Its gradients against double-precision finite differences; its output and every
// gradient the three ops' bit for bit on every host backend and under every autocast dtype;
// fp8 operands run the three ops; what it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend_scope.h"
#include "gradcheck.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/runtime/autocast.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/// y [m, e] of x [m, d] in double: W2 gelu(W1 x + b1) + b2 (biases empty: none).
VecD mlp_ref(const VecD& x, const VecD& w1, const VecD& b1, const VecD& w2, const VecD& b2,
             std::size_t d, std::size_t h, std::size_t e) {
  const std::size_t m = x.size() / d;
  VecD y(m * e);
  for (std::size_t i = 0; i < m; ++i) {
    VecD g(h);
    for (std::size_t j = 0; j < h; ++j) {
      double s = b1.empty() ? 0.0 : b1[j];
      for (std::size_t p = 0; p < d; ++p) s += x[i * d + p] * w1[j * d + p];
      g[j] = gelu_tanh_ref(s);
    }
    for (std::size_t o = 0; o < e; ++o) {
      double s = b2.empty() ? 0.0 : b2[o];
      for (std::size_t j = 0; j < h; ++j) s += g[j] * w2[o * h + j];
      y[i * e + o] = s;
    }
  }
  return y;
}

TEST(GeluMlpOpTest, Gradcheck) {
  // x [2, 3, 4] (leading dims flattened), W1 [5, 4], b1 [5], W2 [3, 5], b2 [3]; pre-activations
  // over GELU's bend and both tails.
  gradcheck([](const Ts& t) { return gelu_mlp(t[0], t[1], t[2], t[3], t[4]); },
            [](const Vs& v) { return mlp_ref(v[0], v[1], v[2], v[3], v[4], 4, 5, 3); },
            {{{2, 3, 4}, random_values(24, 31)},
             {{5, 4}, random_values(20, 32, -1.5f, 1.5f)},
             {{5}, random_values(5, 33)},
             {{3, 5}, random_values(15, 34)},
             {{3}, random_values(3, 35)}});
  // Without biases.
  gradcheck([](const Ts& t) { return gelu_mlp(t[0], t[1], Tensor(), t[2], Tensor()); },
            [](const Vs& v) { return mlp_ref(v[0], v[1], {}, v[2], {}, 4, 5, 3); },
            {{{3, 4}, random_values(12, 36)},
             {{5, 4}, random_values(20, 37, -1.5f, 1.5f)},
             {{3, 5}, random_values(15, 38)}});
}

struct MlpRun {
  std::vector<std::pair<std::string, std::vector<float>>> outputs;  ///< y, then the gradients
  DType y_dtype;
  std::string producer;
};

/// One forward and backward of the MLP, fused or as the three ops, in a region of `lower`
/// (f32: no region), the parameters f32 leaves (autocast casts them, as a model's masters).
/// Shapes that are no multiple of 8 or of a vector, and m past one column-sum tile.
MlpRun run_mlp(bool fused, DType lower, bool biases = true) {
  const std::int64_t d = 24, h = 70, e = 19;
  Tensor x = Tensor::randn({3, 97, d}, 51);
  if (lower != DType::f32) x = x.to(lower).detach();
  Tensor w1 = Tensor::uniform({h, d}, 52, -0.4f, 0.4f), b1 = Tensor::uniform({h}, 53, -0.5f, 0.5f);
  Tensor w2 = Tensor::uniform({e, h}, 54, -0.3f, 0.3f), b2 = Tensor::uniform({e}, 55, -0.5f, 0.5f);
  for (Tensor* t : {&x, &w1, &b1, &w2, &b2}) t->set_requires_grad(true);
  const Tensor nb1 = biases ? b1 : Tensor(), nb2 = biases ? b2 : Tensor();
  Tensor y;
  {
    runtime::Autocast region(lower != DType::f32, lower == DType::f32 ? DType::bf16 : lower);
    y = fused ? gelu_mlp(x, w1, nb1, w2, nb2)
              : linear(gelu(linear(x, w1, nb1), GeluApproximation::tanh), w2, nb2);
  }
  const Tensor c = Tensor::randn(y.shape(), 56);
  sum(mul(y.to(DType::f32), c)).backward();
  const auto grad = [](const Tensor& t) {
    return t.grad().defined() ? t.grad().to(DType::f32).to_vector() : std::vector<float>();
  };
  return {{{"y", y.to(DType::f32).to_vector()}, {"dx", grad(x)}, {"dW1", grad(w1)}, {"db1", grad(b1)},
           {"dW2", grad(w2)}, {"db2", grad(b2)}},
          y.dtype(), y.grad_fn() ? y.grad_fn()->name() : "none"};
}

TEST(GeluMlpOpTest, EqualsTheOpsOneAfterAnotherBitForBit) {
  for (const char* backend : {"ref", "cpu", "devsim"}) {
    BackendScope scope(backend);
    for (const DType lower : {DType::f32, DType::bf16, DType::f16}) {
      for (const bool biases : {true, false}) {
        SCOPED_TRACE(std::string(backend) + " " + name(lower) + (biases ? "" : " no biases"));
        const MlpRun f = run_mlp(true, lower, biases), c = run_mlp(false, lower, biases);
        EXPECT_EQ(f.producer, "gelu_mlp");
        EXPECT_EQ(c.producer, "linear");
        EXPECT_EQ(f.y_dtype, c.y_dtype);
        for (std::size_t i = 0; i < f.outputs.size(); ++i) {
          EXPECT_EQ(f.outputs[i].second, c.outputs[i].second) << f.outputs[i].first;
        }
      }
    }
  }
}

TEST(GeluMlpOpTest, FollowsLinearsAutocastRowAndKeepsGradientsF32ForF32Leaves) {
  for (const DType lower : {DType::bf16, DType::f16}) {
    const MlpRun f = run_mlp(true, lower);
    EXPECT_EQ(f.y_dtype, runtime::documented_output_dtype(runtime::OpKind::linear, DType::f32, lower));
  }
  // Outside a region the dtypes are the caller's: f32 stays f32.
  EXPECT_EQ(run_mlp(true, DType::f32).y_dtype, DType::f32);
}

TEST(GeluMlpOpTest, WithoutGradientsAndWithSomeInputsFrozen) {
  const Tensor x = Tensor::randn({7, 12}, 61);
  const Tensor w1 = Tensor::randn({20, 12}, 62), b1 = Tensor::randn({20}, 63);
  const Tensor w2 = Tensor::randn({5, 20}, 64), b2 = Tensor::randn({5}, 65);
  const Tensor apart = linear(gelu(linear(x, w1, b1), GeluApproximation::tanh), w2, b2);
  {
    runtime::NoGradGuard no_grad;  // no pre-activation kept
    EXPECT_EQ(gelu_mlp(x, w1, b1, w2, b2).to_vector(), apart.to_vector());
  }
  // Only x needs a gradient (frozen weights); then only the second layer's.
  Tensor xg = x.detach(), w2g = w2.detach(), b2g = b2.detach();
  xg.set_requires_grad(true);
  gelu_mlp(xg, w1, b1, w2, b2).backward(Tensor::ones({7, 5}));
  Tensor xr = x.detach();
  xr.set_requires_grad(true);
  linear(gelu(linear(xr, w1, b1), GeluApproximation::tanh), w2, b2).backward(Tensor::ones({7, 5}));
  EXPECT_EQ(xg.grad().to_vector(), xr.grad().to_vector());
  w2g.set_requires_grad(true);
  b2g.set_requires_grad(true);
  gelu_mlp(x, w1, b1, w2g, b2g).backward(Tensor::ones({7, 5}));
  EXPECT_TRUE(w2g.grad().defined() && b2g.grad().defined());
}

TEST(GeluMlpOpTest, Fp8OperandsRunTheThreeOps) {
  // fp8 x and W1: the first linear decodes them to f32, its f32 output meets an f32 W2.
  const Tensor x = Tensor::randn({4, 16}, 71).to(DType::f8e4m3);
  const Tensor w1 = Tensor::randn({32, 16}, 72).to(DType::f8e4m3);
  const Tensor w2 = Tensor::randn({8, 32}, 73);
  const Tensor fused = gelu_mlp(x, w1, Tensor(), w2, Tensor());
  const Tensor apart = linear(gelu(linear(x, w1), GeluApproximation::tanh), w2);
  EXPECT_EQ(fused.dtype(), apart.dtype());
  EXPECT_EQ(fused.to_vector(), apart.to_vector());
  // An fp8 W2 meets the f32 GELU output: refused as the three ops refuse it.
  EXPECT_THROW(gelu_mlp(x, w1, Tensor(), w2.to(DType::f8e4m3), Tensor()), DTypeError);
}

TEST(GeluMlpOpTest, BadInputsThrowNamingTheOp) {
  const Tensor x = Tensor::randn({2, 4}, 81);
  const Tensor w1 = Tensor::randn({6, 4}, 82), w2 = Tensor::randn({3, 6}, 83);
  EXPECT_THROW(gelu_mlp(Tensor(), w1, Tensor(), w2, Tensor()), StateError);
  EXPECT_THROW(gelu_mlp(x, Tensor::randn({6, 5}, 84), Tensor(), w2, Tensor()), ShapeError);
  EXPECT_THROW(gelu_mlp(x, w1, Tensor(), Tensor::randn({3, 7}, 85), Tensor()), ShapeError);
  EXPECT_THROW(gelu_mlp(x, w1, Tensor::randn({5}, 86), w2, Tensor()), ShapeError);
  EXPECT_THROW(gelu_mlp(x, w1, Tensor(), w2, Tensor::randn({4}, 87)), ShapeError);
  EXPECT_THROW(gelu_mlp(x, w1, Tensor(), w2.to(DType::bf16), Tensor()), DTypeError);
  try {
    gelu_mlp(x, w1, Tensor(), Tensor::randn({3, 7}, 85), Tensor());
  } catch (const ShapeError& err) {
    EXPECT_NE(std::string(err.what()).find("gelu_mlp"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace mixprec::testing
