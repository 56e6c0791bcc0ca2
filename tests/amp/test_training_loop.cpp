// The seeds' loop end to end: every precision mode learns, and gradient accumulation over
// micro-batches equals one large batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mixprec/mixprec.h"

namespace mixprec::amp {
namespace {

struct Task {
  Tensor x;
  std::vector<std::int64_t> y;
};

// Labels from a fixed random linear teacher: learnable, like the seed MLP's synthetic task.
Task make_task(std::int64_t n, std::int64_t in, std::uint64_t seed) {
  Task t{Tensor::randn({n, in}, seed), {}};
  nn::Linear teacher(in, 10, false, seed + 1);
  runtime::NoGradGuard no_grad;
  const std::vector<float> logits = teacher.forward(t.x).to_vector();
  for (std::int64_t r = 0; r < n; ++r) {
    const auto row = logits.begin() + r * 10;
    t.y.push_back(std::max_element(row, row + 10) - row);
  }
  return t;
}

std::shared_ptr<nn::Sequential> mlp(std::int64_t in) {
  return nn::sequential({std::make_shared<nn::Linear>(in, 128, true, 1), std::make_shared<nn::ReLU>(),
                         std::make_shared<nn::Linear>(128, 128, true, 2), std::make_shared<nn::ReLU>(),
                         std::make_shared<nn::Linear>(128, 10, true, 3)});
}

// Trains the seeds' MLP shape (scaled down) in one mode; returns the losses per step.
std::vector<float> train(PrecisionMode mode, int steps) {
  const PrecisionPolicy policy = PrecisionPolicy::for_mode(mode);
  auto model = mlp(64);
  apply_parameter_dtypes(*model, policy);
  optim::OptimizerOptions common;
  if (mode == PrecisionMode::pure_bf16_sr) common.master_weights = optim::MasterWeights::none_stochastic_rounding;
  optim::Adam opt(model->parameters(), {.lr = 2e-3f}, common);
  GradScaler scaler({.enabled = mode == PrecisionMode::fp16});
  const Task task = make_task(128, 64, 7);
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    Tensor loss;
    {
      Autocast region(policy.dtypes.compute != DType::f32,
                      policy.dtypes.compute == DType::f16 ? DType::f16 : DType::bf16);
      loss = cross_entropy(model->forward(task.x), task.y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    losses.push_back(loss.item());
  }
  return losses;
}

class EveryMode : public ::testing::TestWithParam<PrecisionMode> {};

TEST_P(EveryMode, LossFalls) {
  const std::vector<float> losses = train(GetParam(), 40);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    first += losses[static_cast<std::size_t>(i)];
    last += losses[losses.size() - 1 - static_cast<std::size_t>(i)];
  }
  EXPECT_LT(last, 0.6 * first) << "mean of the first 5 losses " << first / 5 << ", last 5 " << last / 5;
  for (float l : losses) EXPECT_TRUE(std::isfinite(l));
}

INSTANTIATE_TEST_SUITE_P(Modes, EveryMode,
                         ::testing::Values(PrecisionMode::fp32, PrecisionMode::bf16, PrecisionMode::fp16,
                                           PrecisionMode::pure_bf16, PrecisionMode::pure_bf16_sr),
                         [](const auto& param_info) {
                           std::string n = name(param_info.param);
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// 4 micro-batches of 8, each loss divided by 4, one unscale/step/update, give the same update
// as one batch of 32 (the mean of means equals the mean).
void check_accumulation(DType compute, double atol, double rtol) {
  const Task task = make_task(32, 16, 3);
  auto big = mlp(16), small = mlp(16);
  optim::SGD opt_big(big->parameters(), {.lr = 0.1f}), opt_small(small->parameters(), {.lr = 0.1f});
  GradScaler scaler_big({.init_scale = 1024}), scaler_small({.init_scale = 1024});
  const bool autocast = compute != DType::f32;
  {
    Tensor loss;
    {
      Autocast region(autocast, autocast ? compute : DType::bf16);
      loss = cross_entropy(big->forward(task.x), task.y);
    }
    scaler_big.scale(loss).backward();
    ASSERT_TRUE(scaler_big.step(opt_big));
    scaler_big.update();
  }
  for (std::int64_t m = 0; m < 4; ++m) {
    const Tensor xm = task.x.slice(0, m * 8, m * 8 + 8);
    const std::vector<std::int64_t> ym(task.y.begin() + m * 8, task.y.begin() + m * 8 + 8);
    Tensor loss;
    {
      Autocast region(autocast, autocast ? compute : DType::bf16);
      loss = cross_entropy(small->forward(xm), ym) * 0.25f;
    }
    scaler_small.scale(loss).backward();
  }
  ASSERT_TRUE(scaler_small.step(opt_small));
  scaler_small.update();
  EXPECT_EQ(opt_small.steps(), 1);
  const auto pb = big->named_parameters(), ps = small->named_parameters();
  for (std::size_t i = 0; i < pb.size(); ++i) {
    const std::vector<float> a = pb[i].second.to_vector(), b = ps[i].second.to_vector();
    for (std::size_t k = 0; k < a.size(); ++k) {
      ASSERT_NEAR(a[k], b[k], atol + rtol * std::abs(a[k])) << pb[i].first << "[" << k << "]";
    }
  }
}

TEST(GradientAccumulation, FourMicroBatchesEqualOneBatchF32) { check_accumulation(DType::f32, 1e-6, 1e-5); }
// bf16 compute rounds activations and gradients per micro-batch (relative 2^-8), and the update
// is lr * grad with lr = 0.1 and gradients up to ~1e-2: parameter differences up to ~1e-5.
TEST(GradientAccumulation, FourMicroBatchesEqualOneBatchBf16) { check_accumulation(DType::bf16, 2e-5, 1e-3); }

}  // namespace
}  // namespace mixprec::amp
