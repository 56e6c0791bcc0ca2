// batch_norm_relu: batch norm with the ReLU (and the residual add) that follows it fused into
// one op. It must be the ops one after the other bit for bit, forward and gradients, on every
// backend and in both memory formats; modules fuse only where nothing watches the calls.
#include <gtest/gtest.h>

#include <string>

#include "backend_scope.h"
#include "gradcheck.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/normalization.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/runtime/autocast.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

/// Double relu(batch_norm(x) + r) of x [n, c, s], training statistics, affine w, b.
VecD bn_add_relu_ref(const VecD& x, const VecD& r, std::int64_t n, std::int64_t c,
                     std::int64_t s, const VecD& w, const VecD& b) {
  VecD y(x.size());
  for (std::int64_t k = 0; k < c; ++k) {
    auto at = [&](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>((i * c + k) * s + j); };
    double sum = 0, sq = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < s; ++j) sum += x[at(i, j)];
    const double mean = sum / static_cast<double>(n * s);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < s; ++j) sq += (x[at(i, j)] - mean) * (x[at(i, j)] - mean);
    const double invstd = 1.0 / std::sqrt(sq / static_cast<double>(n * s) + 1e-5);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < s; ++j) {
        const double v = (x[at(i, j)] - mean) * invstd * w[k] + b[k] + (r.empty() ? 0.0 : r[at(i, j)]);
        y[at(i, j)] = v > 0.0 ? v : 0.0;
      }
  }
  return y;
}

TEST(BatchNormReluOpTest, Gradcheck) {
  for (const bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "with residual" : "without");
    std::vector<GradcheckInput> inputs = {{{2, 3, 4, 5}, random_values(120, 61)},
                                          {{3}, random_values(3, 62, 0.5f, 1.5f)},
                                          {{3}, random_values(3, 63)}};
    if (residual) inputs.push_back({{2, 3, 4, 5}, random_values(120, 64)});
    gradcheck(
        [residual](const Ts& t) {
          Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
          return batch_norm_relu(t[0], rm, rv, t[1], t[2], true, 0.1f, 1e-5f,
                                 residual ? t[3] : Tensor());
        },
        [residual](const Vs& v) {
          return bn_add_relu_ref(v[0], residual ? v[3] : VecD(), 2, 3, 20, v[1], v[2]);
        },
        inputs);
  }
}

struct BnReluRun {
  std::vector<float> y, dx, dw, db, dr, running_mean, running_var;
  DType y_dtype;
};

/// One forward and backward of relu(batch_norm(x) [+ r]) fused or composed, in format, inside
/// a region of `lower` (f32: no region).
BnReluRun run_bn_relu(bool fused, bool residual, MemoryFormat format, DType lower) {
  Tensor x = Tensor::randn({4, 6, 5, 7}, 71), r = Tensor::randn({4, 6, 5, 7}, 72);
  Tensor w = Tensor::uniform({6}, 73, 0.5f, 1.5f), b = Tensor::randn({6}, 74);
  if (lower != DType::f32) {
    x = x.to(lower);
    r = r.to(lower);
  }
  x = x.contiguous(format).detach();
  r = r.detach();
  for (Tensor* t : {&x, &r, &w, &b}) t->set_requires_grad(true);
  Tensor rm = Tensor::zeros({6}), rv = Tensor::ones({6});
  Tensor y;
  {
    runtime::Autocast region(lower != DType::f32, lower == DType::f32 ? DType::bf16 : lower);
    if (fused) {
      y = batch_norm_relu(x, rm, rv, w, b, true, 0.1f, 1e-5f, residual ? r : Tensor());
    } else {
      const Tensor z = batch_norm(x, rm, rv, w, b, true);
      y = relu(residual ? add(z, r) : z);
    }
  }
  EXPECT_EQ(y.memory_format(), format);
  const Tensor c = Tensor::randn(y.shape(), 75);
  sum(mul(y.to(DType::f32), c)).backward();
  BnReluRun out{y.to_vector(), x.grad().to_vector(), w.grad().to_vector(), b.grad().to_vector(),
          residual ? r.grad().to_vector() : std::vector<float>(), rm.to_vector(), rv.to_vector(),
          y.dtype()};
  return out;
}

TEST(BatchNormReluOpTest, EqualsTheOpsOneAfterAnotherBitForBit) {
  for (const char* backend : {"ref", "cpu", "devsim"}) {
    BackendScope scope(backend);
    for (const MemoryFormat format : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
      for (const DType lower : {DType::f32, DType::bf16, DType::f16}) {
        for (const bool residual : {false, true}) {
          SCOPED_TRACE(std::string(backend) + " " + name(format) + " " + name(lower) +
                       (residual ? " add_relu" : " relu"));
          const BnReluRun f = run_bn_relu(true, residual, format, lower),
                         c = run_bn_relu(false, residual, format, lower);
          EXPECT_EQ(f.y_dtype, c.y_dtype);
          EXPECT_EQ(f.y, c.y);
          EXPECT_EQ(f.dx, c.dx);
          EXPECT_EQ(f.dw, c.dw);
          EXPECT_EQ(f.db, c.db);
          EXPECT_EQ(f.dr, c.dr);
          EXPECT_EQ(f.running_mean, c.running_mean);
          EXPECT_EQ(f.running_var, c.running_var);
        }
      }
    }
  }
}

TEST(BatchNormReluOpTest, OtherResidualsRunAsTheSeparateOpsAndBadInputsThrow) {
  const Tensor x = Tensor::randn({2, 3, 4, 4}, 81);
  Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
  const Tensor w = Tensor::ones({3}), b = Tensor::zeros({3});
  // A broadcast residual and one of another dtype (the add promotes): the ops apart.
  const Tensor row = Tensor::randn({4}, 82), wide = Tensor::randn({2, 3, 4, 4}, 83, DType::bf16);
  for (const Tensor& r : {row, wide}) {
    Tensor m1 = Tensor::zeros({3}), v1 = Tensor::ones({3}), m2 = m1.clone(), v2 = v1.clone();
    const Tensor f = batch_norm_relu(x, m1, v1, w, b, true, 0.1f, 1e-5f, r);
    const Tensor c = relu(add(batch_norm(x, m2, v2, w, b, true), r));
    EXPECT_EQ(f.dtype(), c.dtype());
    EXPECT_EQ(f.to_vector(), c.to_vector());
  }
  EXPECT_THROW(batch_norm_relu(Tensor(), rm, rv, w, b, true), StateError);
  EXPECT_THROW(batch_norm_relu(x, rm, rv, Tensor::ones({4}), b, true), ShapeError);
  EXPECT_THROW(batch_norm_relu(x.to(DType::f8e4m3), rm, rv, w, b, true), DTypeError);
  EXPECT_THROW(batch_norm_relu(x, rm, rv, w, b, true, 0.1f, -1.0f), ValueError);
}

/// The node that produced y: which op ran.
std::string producer(const Tensor& y) { return y.grad_fn() ? y.grad_fn()->name() : "none"; }

TEST(BatchNormReluModuleTest, SequentialFusesBatchNormThenReluOnlyWhenNothingWatches) {
  auto model = nn::sequential({std::make_shared<nn::BatchNorm2d>(3), std::make_shared<nn::ReLU>()});
  Tensor x = Tensor::randn({2, 3, 4, 4}, 91);
  x.set_requires_grad(true);
  const Tensor fused = (*model)(x);
  EXPECT_EQ(producer(fused), "batch_norm_relu");
  // A compute-dtype override on the norm (what the pure modes give norms) hides the pair from
  // fusion: the module's call then runs as it always did, and the numbers agree.
  auto model2 = nn::sequential({std::make_shared<nn::BatchNorm2d>(3), std::make_shared<nn::ReLU>()});
  model2->children()[0].second->set_compute_dtype(DType::f32);
  const Tensor apart = (*model2)(x);
  EXPECT_EQ(producer(apart), "relu");
  EXPECT_EQ(fused.to_vector(), apart.to_vector());
  // Eval mode fuses too (running statistics).
  model->train(false);
  EXPECT_EQ(producer((*model)(x)), "batch_norm_relu");
}

TEST(BatchNormReluModuleTest, ReluForwardWithResidualEqualsTheModuleCallAddAndRelu) {
  nn::BatchNorm2d a(3), b(3);
  const Tensor x = Tensor::randn({2, 3, 4, 4}, 95), r = Tensor::randn({2, 3, 4, 4}, 96);
  const Tensor fused = a.relu_forward(x, r);
  EXPECT_EQ(producer(fused), "batch_norm_add_relu");
  EXPECT_EQ(fused.to_vector(), relu(add(b(x), r)).to_vector());
  EXPECT_EQ(a.running_mean().to_vector(), b.running_mean().to_vector());
  EXPECT_EQ(a.running_var().to_vector(), b.running_var().to_vector());
}

}  // namespace
}  // namespace mixprec::testing
