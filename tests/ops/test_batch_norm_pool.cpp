// batch_norm_relu_max_pool2d: batch norm, ReLU and a max pool whose windows tile the image in
// one op. Its output and running statistics must be the separate ops' bits, its gradients
// theirs up to the order of the f32 sums, on every backend and in both memory formats; its
// gradient is checked against double finite differences; Sequential runs it for a BatchNorm2d,
// ReLU, MaxPool2d(k) of channels-last activations only.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend_scope.h"
#include "gradcheck.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/conv.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/normalization.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/runtime/autocast.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

/// Double max_pool2d(relu(batch_norm(x)), k) of x [n, c, h, w] (NCHW), training statistics.
VecD bn_relu_pool_ref(const VecD& x, std::int64_t n, std::int64_t c, std::int64_t h,
                      std::int64_t w, std::int64_t k, const VecD& wt, const VecD& b) {
  const std::int64_t ho = h / k, wo = w / k;
  VecD y(static_cast<std::size_t>(n * c * ho * wo));
  for (std::int64_t ch = 0; ch < c; ++ch) {
    auto at = [&](std::int64_t i, std::int64_t p) { return x[static_cast<std::size_t>((i * c + ch) * h * w + p)]; };
    double sum = 0, sq = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t p = 0; p < h * w; ++p) sum += at(i, p);
    const double mean = sum / static_cast<double>(n * h * w);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t p = 0; p < h * w; ++p) sq += (at(i, p) - mean) * (at(i, p) - mean);
    const double invstd = 1.0 / std::sqrt(sq / static_cast<double>(n * h * w) + 1e-5);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t oy = 0; oy < ho; ++oy)
        for (std::int64_t ox = 0; ox < wo; ++ox) {
          double best = 0.0;  // ReLU: the maximum is at least 0
          for (std::int64_t dy = 0; dy < k; ++dy)
            for (std::int64_t dx = 0; dx < k; ++dx) {
              const double v = (at(i, (oy * k + dy) * w + ox * k + dx) - mean) * invstd * wt[static_cast<std::size_t>(ch)] + b[static_cast<std::size_t>(ch)];
              best = v > best ? v : best;
            }
          y[static_cast<std::size_t>(((i * c + ch) * ho + oy) * wo + ox)] = best;
        }
  }
  return y;
}

TEST(BatchNormPoolOpTest, GradcheckInBothLayouts) {
  for (const MemoryFormat format : {MemoryFormat::channels_last, MemoryFormat::contiguous}) {
    SCOPED_TRACE(name(format));
    gradcheck(
        [format](const Ts& t) {
          Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
          return batch_norm_relu_max_pool2d(t[0].contiguous(format), rm, rv, t[1], t[2], true, 2);
        },
        [](const Vs& v) { return bn_relu_pool_ref(v[0], 2, 3, 4, 6, 2, v[1], v[2]); },
        {{{2, 3, 4, 6}, random_values(144, 161)},
         {{3}, random_values(3, 162, 0.5f, 1.5f)},
         {{3}, random_values(3, 163)}});
  }
}

struct PoolRun {
  std::vector<float> y, dx, dw, db, running_mean, running_var;
  DType y_dtype;
  MemoryFormat y_format;
};

/// One forward and backward of max_pool2d(relu(batch_norm(x)), 2), fused or as the ops, in
/// format, inside a region of `lower` (f32: no region), training or eval.
PoolRun run(bool fused, MemoryFormat format, DType lower, bool training) {
  Tensor x = Tensor::randn({4, 19, 6, 8}, 171);
  Tensor w = Tensor::uniform({19}, 173, -1.5f, 1.5f), b = Tensor::randn({19}, 174);
  if (lower != DType::f32) x = x.to(lower);
  x = x.contiguous(format).detach();
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
  Tensor rm = Tensor::uniform({19}, 175, -0.5f, 0.5f), rv = Tensor::uniform({19}, 176, 0.5f, 2.0f);
  Tensor y;
  {
    runtime::Autocast region(lower != DType::f32, lower == DType::f32 ? DType::bf16 : lower);
    y = fused ? batch_norm_relu_max_pool2d(x, rm, rv, w, b, training, 2)
              : max_pool2d(batch_norm_relu(x, rm, rv, w, b, training), 2);
  }
  const Tensor c = Tensor::randn(y.shape(), 177);
  sum(mul(y.to(DType::f32), c)).backward();
  return {y.to_vector(), x.grad().to_vector(), w.grad().to_vector(), b.grad().to_vector(),
          rm.to_vector(), rv.to_vector(), y.dtype(), y.memory_format()};
}

/// Gradient sums over the argmax pixels in another order than the ops' sums over every pixel.
void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, double tol,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

TEST(BatchNormPoolOpTest, EqualsTheOpsOneAfterAnother) {
  for (const char* backend : {"ref", "cpu", "devsim"}) {
    BackendScope scope(backend);
    for (const MemoryFormat format : {MemoryFormat::channels_last, MemoryFormat::contiguous}) {
      for (const DType lower : {DType::f32, DType::bf16, DType::f16}) {
        for (const bool training : {true, false}) {
          SCOPED_TRACE(std::string(backend) + " " + name(format) + " " + name(lower) +
                       (training ? " training" : " eval"));
          const PoolRun f = run(true, format, lower, training), c = run(false, format, lower, training);
          EXPECT_EQ(f.y_dtype, c.y_dtype);
          EXPECT_EQ(f.y_format, format);
          EXPECT_EQ(f.y, c.y);
          EXPECT_EQ(f.running_mean, c.running_mean);
          EXPECT_EQ(f.running_var, c.running_var);
          // dx rounds to the dtype after sums that may differ in their last f32 bits.
          const double tol = lower == DType::f32 ? 1e-5 : 2 * traits(lower).epsilon;
          expect_near_all(f.dx, c.dx, tol, "dx");
          expect_near_all(f.dw, c.dw, 1e-5, "dweight");
          expect_near_all(f.db, c.db, 1e-5, "dbias");
        }
      }
    }
  }
}

TEST(BatchNormPoolOpTest, WindowsThatDoNotTileAreRefused) {
  Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
  const Tensor w = Tensor::ones({3}), b = Tensor::zeros({3});
  EXPECT_THROW(batch_norm_relu_max_pool2d(Tensor::randn({2, 3, 5, 6}, 1), rm, rv, w, b, true, 2),
               ValueError);  // 5 rows
  EXPECT_THROW(batch_norm_relu_max_pool2d(Tensor::randn({2, 3, 4, 4}, 1), rm, rv, w, b, true, 3),
               ValueError);
  EXPECT_THROW(batch_norm_relu_max_pool2d(Tensor::randn({2, 3, 16}, 1), rm, rv, w, b, true, 2),
               ShapeError);
}

/// The node that produced y: which op ran.
std::string producer(const Tensor& y) { return y.grad_fn() ? y.grad_fn()->name() : "none"; }

TEST(BatchNormPoolModuleTest, SequentialFusesTheTripleOnChannelsLastActivations) {
  auto model = nn::sequential({std::make_shared<nn::BatchNorm2d>(5), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::MaxPool2d>(2)});
  auto twin = nn::sequential({std::make_shared<nn::BatchNorm2d>(5), std::make_shared<nn::ReLU>(),
                              std::make_shared<nn::MaxPool2d>(2)});
  Tensor x = Tensor::randn({3, 5, 6, 4}, 191).contiguous(MemoryFormat::channels_last).detach();
  x.set_requires_grad(true);
  const Tensor fused = (*model)(x);
  EXPECT_EQ(producer(fused), "batch_norm_relu_max_pool2d");
  // NCHW keeps batch_norm_relu then max_pool2d (the fused op's NCHW path is those kernels).
  const Tensor apart = (*twin)(x.contiguous());
  EXPECT_EQ(producer(apart), "max_pool2d");
  // (NCHW sums each channel's statistics in another order: the last f32 bits may differ.)
  expect_near_all(fused.to_vector(), apart.to_vector(), 1e-6, "fused against NCHW apart");
  // Windows that overlap, or do not tile the input, run the modules apart.
  auto overlapping = nn::sequential({std::make_shared<nn::BatchNorm2d>(5), std::make_shared<nn::ReLU>(),
                                     std::make_shared<nn::MaxPool2d>(2, 1)});
  EXPECT_EQ(producer((*overlapping)(x)), "max_pool2d");
  auto three = nn::sequential({std::make_shared<nn::BatchNorm2d>(5), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::MaxPool2d>(3)});
  EXPECT_EQ(producer((*three)(x)), "max_pool2d");  // 6x4: 4 columns are not a multiple of 3
  // Eval mode fuses too (running statistics).
  model->train(false);
  EXPECT_EQ(producer((*model)(x)), "batch_norm_relu_max_pool2d");
}

}  // namespace
}  // namespace mixprec::testing
