// Gradient clipping against a double-precision re-computation of torch.nn.utils.clip_grad_norm_
// and clip_grad_value_, the loss-scale check (the classic AMP bug), and argument validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/clip_grad.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::optim {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kF32Eps = traits(DType::f32).epsilon;
/// Rigorous bound on the relative error of an f32 sum of at most 1000 non-negative terms (the
/// largest tensor below) in any order: n * eps. Loose, yet far below any formula mistake.
constexpr double kNormRelTol = 1000 * kF32Eps;

/// A parameter with a random gradient of the given dtype and shape.
Tensor param_with_grad(const Shape& shape, DType grad_dtype, std::uint64_t seed, float stddev) {
  Tensor p = Tensor::zeros(shape);
  p.set_requires_grad();
  p.set_grad(Tensor::randn(shape, seed, grad_dtype, 0.0f, stddev));
  return p;
}

std::vector<Tensor> mixed_params() {
  return {param_with_grad({10, 100}, DType::f32, 1, 1.0f),
          param_with_grad({37}, DType::bf16, 2, 3.0f),
          param_with_grad({4, 33}, DType::f16, 3, 0.5f)};
}

std::vector<std::vector<float>> grad_values(const std::vector<Tensor>& params) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : params) out.push_back(p.grad().to_vector());
  return out;
}

/// The total norm in double from the stored gradient values.
double ref_norm(const std::vector<std::vector<float>>& grads, bool inf_norm) {
  double acc = 0.0;
  for (const auto& g : grads) {
    for (float v : g) acc = inf_norm ? std::max(acc, std::fabs(double{v})) : acc + double{v} * v;
  }
  return inf_norm ? acc : std::sqrt(acc);
}

/// Checks that every gradient equals its old value times PyTorch's coefficient (or is unchanged).
void expect_clipped(const std::vector<Tensor>& params, const std::vector<std::vector<float>>& before,
                    double max_norm, bool inf_norm) {
  const double total = ref_norm(before, inf_norm);
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> after = params[i].grad().to_vector();
    // One rounding to the gradient's dtype, plus the coefficient's own relative error.
    const double eps = traits(params[i].grad().dtype()).epsilon + kNormRelTol;
    for (std::size_t j = 0; j < after.size(); ++j) {
      const double want = before[i][j] * coef;
      ASSERT_NEAR(after[j], want, 1e-30 + std::fabs(want) * eps) << "param " << i << " elem " << j;
    }
  }
}

class ClipGradNorm : public ::testing::TestWithParam<bool> {};  // param: infinity norm

TEST_P(ClipGradNorm, EqualsDoubleRecomputationOnEveryIsa) {
  const bool inf_norm = GetParam();
  const Isa saved = max_isa();
  for (Isa isa : {Isa::scalar, saved}) {
    set_max_isa(isa);
    std::vector<Tensor> params = mixed_params();
    const auto before = grad_values(params);
    const double total = ref_norm(before, inf_norm);
    const float max_norm = static_cast<float>(total / 4);  // clipping applies
    const float got = clip_grad_norm(params, max_norm, inf_norm ? kInf : 2.0f);
    // amax is exact; the 2-norm carries f32 accumulation error.
    EXPECT_NEAR(got, total, total * (inf_norm ? kF32Eps : kNormRelTol)) << name(isa);
    expect_clipped(params, before, max_norm, inf_norm);
    // After clipping, the total norm is max_norm (up to the 1e-6 guard and rounding).
    const double again = ref_norm(grad_values(params), inf_norm);
    EXPECT_NEAR(again, max_norm, max_norm * 0.01);  // bf16/f16 rounding of each element
  }
  set_max_isa(saved);
}

TEST_P(ClipGradNorm, NotAppliedBelowMaxNorm) {
  const bool inf_norm = GetParam();
  std::vector<Tensor> params = mixed_params();
  const auto before = grad_values(params);
  const double total = ref_norm(before, inf_norm);
  const float got = clip_grad_norm(params, static_cast<float>(total * 2), inf_norm ? kInf : 2.0f);
  EXPECT_NEAR(got, total, total * kNormRelTol);
  EXPECT_EQ(grad_values(params), before);  // bit-for-bit untouched
}

INSTANTIATE_TEST_SUITE_P(Norms, ClipGradNorm, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Inf" : "Two"; });

TEST(ClipGrad, StridedGradientIsClippedInPlace) {
  Tensor p = Tensor::zeros({3, 5});
  p.set_requires_grad();
  const Tensor base = Tensor::randn({5, 3}, 11, DType::bf16);
  const Tensor g = base.transpose(0, 1);  // non-contiguous view of `base`
  ASSERT_FALSE(g.is_contiguous());
  p.set_grad(g);
  const std::vector<Tensor> params{p};
  const auto before = grad_values(params);
  clip_grad_norm(params, 0.5f);
  expect_clipped(params, before, 0.5, false);
  EXPECT_TRUE(p.grad().is_same(g));  // same tensor, written through the view
}

TEST(ClipGrad, ParamsWithoutGradientsAreIgnored) {
  Tensor no_grad = Tensor::zeros({4});
  no_grad.set_requires_grad();
  EXPECT_EQ(clip_grad_norm({no_grad}, 1.0f), 0.0f);
  std::vector<Tensor> params = mixed_params();
  params.push_back(no_grad);
  const auto before = grad_values({params[0], params[1], params[2]});
  const double total = ref_norm(before, false);
  EXPECT_NEAR(clip_grad_norm(params, 1.0f), total, total * kNormRelTol);
  EXPECT_FALSE(no_grad.grad().defined());
}

TEST(ClipGrad, GradientsStillCarryingTheLossScaleThrowStateError) {
  std::vector<Tensor> params = mixed_params();
  const auto before = grad_values(params);
  params[2].set_grad_scale(65536.0);
  try {
    clip_grad_norm(params, 1.0f);
    FAIL() << "expected StateError";
  } catch (const StateError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("clip_grad_norm:", 0), 0u) << what;
    EXPECT_NE(what.find("65536"), std::string::npos) << what;
    EXPECT_NE(what.find("scaler.unscale(optimizer)"), std::string::npos) << what;
  }
  EXPECT_THROW(clip_grad_value(params, 1.0f), StateError);
  EXPECT_EQ(grad_values(params), before);  // refused before touching anything
}

// The AMP recipe: backward on the scaled loss, unscale (x 1/S), then clip. Done in that order it
// equals clipping the unscaled gradients directly; S is a power of two, so unscaling is exact.
TEST(ClipGrad, ClippingAfterUnscaleEqualsClippingInFp32) {
  constexpr float kScale = 65536.0f;
  for (DType dt : {DType::f32, DType::bf16}) {
    std::vector<Tensor> direct = {param_with_grad({200}, dt, 5, 1.0f),
                                  param_with_grad({3, 7}, dt, 6, 2.0f)};
    std::vector<Tensor> amp;
    for (const Tensor& p : direct) {
      Tensor q = Tensor::zeros(p.shape());
      q.set_requires_grad();
      const std::vector<float> g = p.grad().to_vector();
      std::vector<float> scaled(g.size());
      for (std::size_t j = 0; j < g.size(); ++j) scaled[j] = g[j] * kScale;
      q.set_grad(Tensor::from_vector(scaled, p.shape(), dt));
      q.set_grad_scale(kScale);  // what a scaled backward records
      amp.push_back(q);
    }
    EXPECT_THROW(clip_grad_norm(amp, 1.0f), StateError);
    for (const Tensor& q : amp) {  // scaler.unscale(optimizer)
      const std::vector<float> g = q.grad().to_vector();
      std::vector<float> unscaled(g.size());
      for (std::size_t j = 0; j < g.size(); ++j) unscaled[j] = g[j] * (1.0f / kScale);
      q.set_grad(Tensor::from_vector(unscaled, q.shape(), dt));
      q.set_grad_scale(1.0);
    }
    const float n_amp = clip_grad_norm(amp, 1.0f);
    const float n_direct = clip_grad_norm(direct, 1.0f);
    EXPECT_EQ(n_amp, n_direct) << name(dt);
    EXPECT_EQ(grad_values(amp), grad_values(direct)) << name(dt);
  }
}

TEST(ClipGrad, NonFiniteTotalLeavesGradientsOrThrowsWhenAsked) {
  for (float bad : {kInf, std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<Tensor> params = mixed_params();
    std::vector<float> g = params[1].grad().to_vector();
    g[3] = bad;
    params[1].set_grad(Tensor::from_vector(g, params[1].shape(), DType::bf16));
    const auto before = grad_values(params);
    for (float norm : {2.0f, kInf}) {
      const float total = clip_grad_norm(params, 1.0f, norm);
      EXPECT_FALSE(std::isfinite(total));
      EXPECT_EQ(std::isnan(total), std::isnan(bad)) << "norm " << norm;
      EXPECT_THROW(clip_grad_norm(params, 1.0f, norm, true), ValueError);
    }
    const auto after = grad_values(params);
    for (std::size_t i = 0; i < after.size(); ++i) {  // untouched (NaN != NaN, compare bits)
      for (std::size_t j = 0; j < after[i].size(); ++j) {
        EXPECT_EQ(std::isnan(after[i][j]), std::isnan(before[i][j]));
        if (!std::isnan(before[i][j])) {
          EXPECT_EQ(after[i][j], before[i][j]);
        }
      }
    }
  }
}

/// Raw bits of every element of t (to compare NaN payloads and signed zeros too).
std::vector<std::uint32_t> bits_of(const Tensor& t) {
  std::vector<std::uint32_t> out;
  for (float v : t.to_vector()) {
    std::uint32_t b = 0;
    std::memcpy(&b, &v, 4);
    out.push_back(b);
  }
  return out;
}

/// Parameters of every kind an optimizer updates (f32, bf16 and f16, the 16-bit ones with f32
/// masters) with gradients of their dtypes, the same values for every `seed`.
std::vector<Tensor> optimizable_params() {
  std::vector<Tensor> params;
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f16, DType::f32};
  const Shape shapes[] = {{40, 130}, {37}, {4, 33}, {70001}};
  for (std::size_t i = 0; i < std::size(dtypes); ++i) {
    Tensor p = Tensor::randn(shapes[i], 10 + i, dtypes[i], 0.0f, 0.5f);
    p.set_requires_grad();
    params.push_back(p);
  }
  return params;
}

void set_grads(const std::vector<Tensor>& params, std::uint64_t seed, float stddev) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].set_grad(Tensor::randn(params[i].shape(), seed + i, params[i].dtype(), 0.0f, stddev));
  }
}

// The training step's clipping: the coefficient multiplied into the gradients inside the
// optimizer's update pass gives the bits of clipping them in place and then stepping
// (parameters, masters and every state tensor), and leaves the gradients as they were; with
// the norm above max_norm, below it (coefficient 1) and not finite (coefficient 1: the step
// would be skipped by a scaler, but without one the update still runs), for Adam, AdamW and SGD.
TEST(ClipGrad, CoefficientInTheUpdateEqualsClippingThenStepping) {
  for (const int kind : {0, 1, 2}) {
    for (const float max_norm : {0.5f, 1e6f, 2.0f}) {
      const bool poison = max_norm == 2.0f;  // an Inf gradient element: a non-finite total
      std::vector<Tensor> in_place = optimizable_params(), folded = optimizable_params();
      const auto make = [&](const std::vector<Tensor>& p) -> std::unique_ptr<Optimizer> {
        if (kind == 0) return std::make_unique<Adam>(p, AdamOptions{.lr = 1e-2f, .weight_decay = 0.01f});
        if (kind == 1) return std::make_unique<AdamW>(p, AdamWOptions{.lr = 1e-2f, .weight_decay = 0.1f});
        return std::make_unique<SGD>(p, SgdOptions{.lr = 0.1f, .momentum = 0.9f, .nesterov = true});
      };
      auto a = make(in_place), b = make(folded);
      for (int step = 0; step < 3; ++step) {
        set_grads(in_place, 100 + 10 * step, 0.3f);
        set_grads(folded, 100 + 10 * step, 0.3f);
        if (poison) {
          for (const auto& params : {in_place, folded}) {
            std::vector<float> g = params[0].grad().to_vector();
            g[7] = kInf;
            params[0].set_grad(Tensor::from_vector(g, params[0].shape()));
          }
        }
        const auto grads_before = grad_values(folded);
        const Tensor total_a = clip_grad_norm_tensor(in_place, max_norm);
        a->step();
        const ClipCoefficient clip = clip_grad_norm_coefficient(folded, max_norm);
        ASSERT_TRUE(clip.coef.defined());
        b->step(clip.coef);
        const std::string what = "optimizer " + std::to_string(kind) + ", max_norm " +
                                 std::to_string(max_norm) + ", step " + std::to_string(step);
        EXPECT_EQ(bits_of(clip.total), bits_of(total_a)) << what;
        for (std::size_t i = 0; i < folded.size(); ++i) {
          EXPECT_EQ(bits_of(folded[i]), bits_of(in_place[i])) << what << ", param " << i;
          if (a->master(i).defined()) {
            EXPECT_EQ(bits_of(b->master(i)), bits_of(a->master(i))) << what << ", master " << i;
          }
          const std::vector<float> g = folded[i].grad().to_vector();
          for (std::size_t j = 0; j < g.size(); ++j) {
            ASSERT_TRUE(g[j] == grads_before[i][j] || (std::isnan(g[j]) && std::isnan(grads_before[i][j])))
                << what << ": the gradient of param " << i << " changed at " << j;
          }
        }
        const auto state_a = a->state_tensors(), state_b = b->state_tensors();
        ASSERT_EQ(state_a.size(), state_b.size());
        for (std::size_t k = 0; k < state_a.size(); ++k) {
          EXPECT_EQ(bits_of(state_b[k].second), bits_of(state_a[k].second)) << what << ", " << state_a[k].first;
        }
      }
    }
  }
}

TEST(ClipGrad, CoefficientIsUndefinedWithoutABoundAndStepRejectsABadMultiplier) {
  std::vector<Tensor> params = optimizable_params();
  set_grads(params, 5, 1.0f);
  const ClipCoefficient clip = clip_grad_norm_coefficient(params, kInf);
  EXPECT_FALSE(clip.coef.defined());
  EXPECT_TRUE(std::isfinite(clip.total.item()));
  Adam adam(params, AdamOptions{});
  EXPECT_THROW(adam.step(Tensor::full({2}, 0.5f)), ValueError);
  EXPECT_THROW(adam.step(Tensor::full({}, 0.5f, DType::bf16)), ValueError);
  EXPECT_EQ(adam.steps(), 0);
}

TEST(ClipGrad, ClipValueClampsEveryDtype) {
  std::vector<Tensor> params = mixed_params();
  std::vector<float> g = params[0].grad().to_vector();
  g[7] = std::numeric_limits<float>::quiet_NaN();
  params[0].set_grad(Tensor::from_vector(g, params[0].shape()));
  const auto before = grad_values(params);
  constexpr float kClip = 0.7f;
  clip_grad_value(params, kClip);
  const auto after = grad_values(params);
  for (std::size_t i = 0; i < after.size(); ++i) {
    // The bound as the gradient's dtype holds it (0.7 is not exact in bf16/f16).
    const float hi = Tensor::scalar(kClip, params[i].grad().dtype()).item();
    for (std::size_t j = 0; j < after[i].size(); ++j) {
      const float b = before[i][j];
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(after[i][j]));
        continue;
      }
      EXPECT_EQ(after[i][j], std::clamp(b, -hi, hi)) << "param " << i << " elem " << j;
    }
  }
}

TEST(ClipGrad, BadArgumentsThrowValueError) {
  const std::vector<Tensor> params = mixed_params();
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THROW(clip_grad_norm(params, bad), ValueError) << bad;
    EXPECT_THROW(clip_grad_value(params, bad), ValueError) << bad;
  }
  EXPECT_THROW(clip_grad_norm(params, 1.0f, 1.0f), ValueError);
  EXPECT_THROW(clip_grad_norm(params, 1.0f, -kInf), ValueError);
  EXPECT_THROW(clip_grad_norm({Tensor()}, 1.0f), ValueError);
}

}  // namespace
}  // namespace mixprec::optim
