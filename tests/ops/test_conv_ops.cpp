// conv2d and the pooling ops: gradients against double-precision finite differences, autocast
// dtypes, and argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "ops/conv_reference.h"
#include "mixprec/ops/conv.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

TEST(ConvOpsGrad, Conv2dWrtInputWeightAndBias) {
  const ConvCfg cfgs[] = {{2, 3, 5, 5, 4, 3, 1, 1}, {1, 2, 7, 6, 3, 3, 2, 1},
                          {2, 2, 4, 4, 3, 1, 1, 0}, {1, 2, 6, 6, 2, 2, 2, 0}};
  std::uint64_t seed = 30;
  for (const ConvCfg& g : cfgs) {
    SCOPED_TRACE("conv cfg k=" + std::to_string(g.k) + " s=" + std::to_string(g.stride) +
                 " p=" + std::to_string(g.padding));
    const Shape xs{g.n, g.c, g.h, g.w}, ws{g.o, g.c, g.k, g.k};
    gradcheck([g](const Ts& t) { return conv2d(t[0], t[1], t[2], g.stride, g.padding); },
              [g](const Vs& v) { return conv_ref(g, v[0], v[1], &v[2]); },
              {{xs, random_values(static_cast<std::size_t>(numel(xs)), ++seed)},
               {ws, random_values(static_cast<std::size_t>(numel(ws)), ++seed)},
               {{g.o}, random_values(static_cast<std::size_t>(g.o), ++seed)}});
    gradcheck([g](const Ts& t) { return conv2d(t[0], t[1], Tensor(), g.stride, g.padding); },
              [g](const Vs& v) { return conv_ref(g, v[0], v[1], nullptr); },
              {{xs, random_values(static_cast<std::size_t>(numel(xs)), ++seed)},
               {ws, random_values(static_cast<std::size_t>(numel(ws)), ++seed)}});
  }
}

TEST(ConvOpsGrad, MaxAndAvgPool) {
  struct P {
    std::int64_t k, s, p;
  };
  std::uint64_t seed = 70;
  for (const P& c : {P{2, 2, 0}, P{3, 2, 1}, P{3, 1, 1}, P{2, 1, 0}}) {
    SCOPED_TRACE("pool k=" + std::to_string(c.k) + " s=" + std::to_string(c.s) +
                 " p=" + std::to_string(c.p));
    // Distinct random values: no ties, so max pooling is differentiable at the sample point.
    for (bool max : {true, false}) {
      gradcheck(
          [c, max](const Ts& t) {
            return max ? max_pool2d(t[0], c.k, c.s, c.p) : avg_pool2d(t[0], c.k, c.s, c.p);
          },
          [c, max](const Vs& v) { return pool_ref(v[0], 6, 5, 6, c.k, c.s, c.p, max); },
          {{{2, 3, 5, 6}, random_values(180, ++seed)}});
    }
  }
}

TEST(ConvOpsGrad, GlobalAvgPool) {
  gradcheck([](const Ts& t) { return global_avg_pool2d(t[0]); },
            [](const Vs& v) {
              VecD y(6, 0.0);
              for (std::size_t i = 0; i < v[0].size(); ++i) y[i / 12] += v[0][i] / 12.0;
              return y;
            },
            {{{2, 3, 3, 4}, random_values(72, 99)}});
}

TEST(ConvOps, StrideZeroMeansKernelAndShapes) {
  const Tensor x = Tensor::randn({2, 3, 28, 28}, 1);
  EXPECT_EQ(max_pool2d(x, 2).shape(), (Shape{2, 3, 14, 14}));
  EXPECT_EQ(avg_pool2d(x, 3, 0, 1).shape(), (Shape{2, 3, 10, 10}));
  EXPECT_EQ(global_avg_pool2d(x).shape(), (Shape{2, 3}));
  const Tensor w = Tensor::randn({8, 3, 3, 3}, 2);
  EXPECT_EQ(conv2d(x, w, Tensor(), 2, 1).shape(), (Shape{2, 8, 14, 14}));
  // A non-contiguous input gives the same result as its contiguous copy.
  const Tensor xt = x.transpose(2, 3);
  const std::vector<float> a = conv2d(xt, w, Tensor(), 1, 1).to_vector();
  const std::vector<float> b = conv2d(xt.contiguous(), w, Tensor(), 1, 1).to_vector();
  EXPECT_EQ(a, b);
}

TEST(ConvOps, MaxPoolNaNPropagatesForwardAndBackward) {
  std::vector<float> v(16, 1.0f);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  v[6] = 7.0f;
  Tensor x = Tensor::from_vector(v, {1, 1, 4, 4});
  x.set_requires_grad(true);
  const Tensor y = max_pool2d(x, 2);
  const std::vector<float> yv = y.to_vector();
  EXPECT_TRUE(std::isnan(yv[0]));
  EXPECT_EQ(yv[1], 7.0f);
  y.backward(Tensor::ones({1, 1, 2, 2}));
  const std::vector<float> g = x.grad().to_vector();
  EXPECT_EQ(g[5], 1.0f);  // the NaN's position receives the gradient
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_EQ(g[6], 1.0f);
}

TEST(ConvOpsAutocast, Conv2dRunsInTheRegionDtypeAndGradsComeBackF32) {
  for (DType lower : {DType::bf16, DType::f16}) {
    Tensor x = Tensor::randn({2, 3, 8, 8}, 3);
    Tensor w = Tensor::randn({4, 3, 3, 3}, 4, DType::f32, 0.0f, 0.2f);
    Tensor b = Tensor::randn({4}, 5);
    w.set_requires_grad(true);
    b.set_requires_grad(true);
    x.set_requires_grad(true);
    Tensor y;
    {
      runtime::Autocast ac(true, lower);
      y = conv2d(x, w, b, 1, 1);
      EXPECT_EQ(y.dtype(), lower);
      EXPECT_EQ(max_pool2d(y, 2).dtype(), lower);  // pass-through
      EXPECT_EQ(avg_pool2d(y, 2).dtype(), lower);
      EXPECT_EQ(global_avg_pool2d(y).dtype(), lower);
    }
    y.backward(Tensor::ones(y.shape(), lower));
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    EXPECT_EQ(b.grad().dtype(), DType::f32);
    EXPECT_EQ(x.grad().dtype(), DType::f32);
    // The bias gradient is the sum of the ones: 2 * 8 * 8 = 128 per channel, exact.
    EXPECT_EQ(b.grad().to_vector()[0], 128.0f);
    // And the output matches the f32 result to 16-bit accuracy.
    const std::vector<float> y16 = y.to_vector();
    const std::vector<float> y32 = conv2d(x.detach(), w.detach(), b.detach(), 1, 1).to_vector();
    for (std::size_t i = 0; i < y32.size(); ++i) {
      ASSERT_NEAR(y16[i], y32[i], 0.05 + 4 * traits(lower).epsilon * std::fabs(y32[i])) << i;
    }
  }
}

TEST(ConvOps, SixteenBitWithoutAutocastKeepsDtypes) {
  for (DType t : {DType::bf16, DType::f16}) {
    Tensor x = Tensor::randn({1, 2, 5, 5}, 6, t);
    Tensor w = Tensor::randn({3, 2, 3, 3}, 7, t);
    Tensor b = Tensor::randn({3}, 8, DType::f32);  // an f32 bias with 16-bit data is allowed
    w.set_requires_grad(true);
    b.set_requires_grad(true);
    const Tensor y = conv2d(x, w, b, 1, 1);
    EXPECT_EQ(y.dtype(), t);
    y.backward(Tensor::ones(y.shape(), t));
    EXPECT_EQ(w.grad().dtype(), t);
    EXPECT_EQ(b.grad().dtype(), DType::f32);
    EXPECT_EQ(b.grad().to_vector()[0], 25.0f);
  }
}

TEST(ConvOps, RejectsBadArguments) {
  const Tensor x = Tensor::randn({2, 3, 8, 8}, 1);
  const Tensor w = Tensor::randn({4, 3, 3, 3}, 2);
  EXPECT_THROW(conv2d(x.reshape({6, 8, 8}), w), ShapeError);            // rank
  EXPECT_THROW(conv2d(x, w.reshape({4, 27})), ShapeError);              // weight rank
  EXPECT_THROW(conv2d(x, Tensor::randn({4, 2, 3, 3}, 3)), ShapeError);  // channels
  EXPECT_THROW(conv2d(x, Tensor::randn({4, 3, 9, 9}, 3)), ShapeError);  // kernel > input
  EXPECT_THROW(conv2d(x, w, Tensor::randn({5}, 4)), ShapeError);        // bias size
  EXPECT_THROW(conv2d(x, w, Tensor(), 0), ValueError);
  EXPECT_THROW(conv2d(x, w, Tensor(), 1, -1), ValueError);
  EXPECT_THROW(conv2d(x, w.to(DType::bf16)), DTypeError);
  EXPECT_THROW(conv2d(x.to(DType::bf16), w.to(DType::bf16), Tensor::randn({4}, 5, DType::f16)),
               DTypeError);
  EXPECT_THROW(conv2d(Tensor(), w), StateError);
  EXPECT_THROW(max_pool2d(x, 0), ValueError);
  EXPECT_THROW(max_pool2d(x, 2, -1), ValueError);
  EXPECT_THROW(max_pool2d(x, 2, 2, 2), ValueError);  // padding > kernel / 2
  EXPECT_THROW(max_pool2d(x, 9), ShapeError);
  EXPECT_THROW(avg_pool2d(x.reshape({6, 8, 8}), 2), ShapeError);
  EXPECT_THROW(avg_pool2d(x, 2, 2, -1), ValueError);
  EXPECT_THROW(global_avg_pool2d(x.reshape({6, 64})), ShapeError);
  EXPECT_THROW(global_avg_pool2d(Tensor::zeros({2, 3, 0, 4})), ShapeError);
}

}  // namespace
}  // namespace mixprec::testing
