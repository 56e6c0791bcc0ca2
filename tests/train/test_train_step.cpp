// TrainStep: the one training step. Checked against the loop written out by hand (bit-identical
// parameters), for clipping, accumulation, skipping on overflow and the config reaching the
// scaler and optimizer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mixprec/runtime/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/clip_grad.h"
#include "mixprec/optim/lr_scheduler.h"
#include "mixprec/optim/sgd.h"
#include "mixprec/train/train_step.h"
#include "train/trainer_test_util.h"

namespace mixprec::train {
namespace {

struct Batch {
  Tensor x;
  std::vector<std::int64_t> y;
};

Batch batch(std::uint64_t seed) {
  Batch b{Tensor::randn({8, 784}, seed), {}};
  for (int i = 0; i < 8; ++i) b.y.push_back((i * 7 + static_cast<int>(seed)) % 10);
  return b;
}

// The seeds' loop written out with the primitives, as the Trainer ran it before TrainStep.
TEST(TrainStep, MatchesTheLoopWrittenOutByHandBitForBit) {
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    auto a = models::make_model("mlp", 3), b = models::make_model("mlp", 3);
    const StepConfig config{.precision = precision, .optimizer = "adamw", .lr = 1e-2f,
                            .weight_decay = 0.01f, .clip = 0.5f, .accum = 2, .scheduler = "cosine",
                            .scheduler_steps = 10};
    TrainStep step(*a, config);

    const amp::PrecisionPolicy policy =
        amp::PrecisionPolicy::for_mode(amp::parse_precision_mode(precision));
    amp::apply_parameter_dtypes(*b, policy);
    const bool autocast = policy.dtypes.compute != DType::f32;
    optim::AdamW opt(b->parameters(), optim::AdamWOptions{.lr = 1e-2f, .weight_decay = 0.01f});
    amp::GradScaler scaler(amp::GradScalerOptions{.enabled = std::string(precision) == "fp16"});
    optim::CosineAnnealingLR sched(opt, 10);

    for (int s = 0; s < 3; ++s) {
      float norm_by_hand = 0;
      for (int micro = 0; micro < 2; ++micro) {
        const Batch data = batch(static_cast<std::uint64_t>(10 * s + micro));
        const double loss = step.accumulate([&] { return cross_entropy((*a)(data.x), data.y); });
        Tensor l;
        {
          runtime::Autocast region(autocast, autocast ? policy.dtypes.compute : DType::bf16);
          l = cross_entropy((*b)(data.x), data.y);
        }
        EXPECT_EQ(loss, l.item());
        scaler.scale(l * 0.5f).backward();
      }
      scaler.unscale(opt);
      norm_by_hand = optim::clip_grad_norm(opt.params(), 0.5f);
      EXPECT_EQ(step.unscale_and_clip().item(), norm_by_hand);
      EXPECT_EQ(step.apply(), scaler.step(opt));
      scaler.update();
      sched.step();
      opt.zero_grad();
      EXPECT_EQ(step.optimizer().lr(), opt.lr());
    }
    EXPECT_EQ(test::parameter_values(*a), test::parameter_values(*b));
    EXPECT_EQ(step.scaler().get_scale(), scaler.get_scale());
  }
}

// The norm is reported before clipping; the clipping coefficient is applied inside the
// optimizer's update pass, so the gradients stay as they were in between, and the update is
// bit for bit the one that clipping the gradients in place would give.
TEST(TrainStep, ClipsTheGlobalNormInTheUpdateAndReportsItBeforeClipping) {
  auto model = models::make_model("mlp", 1);
  auto twin = models::make_model("mlp", 1);
  TrainStep step(*model, StepConfig{.precision = "fp32", .lr = 1e-3f, .clip = 1e-3f});
  TrainStep by_hand(*twin, StepConfig{.precision = "fp32", .lr = 1e-3f});
  const Batch data = batch(1);
  step.accumulate([&] { return cross_entropy((*model)(data.x), data.y); });
  by_hand.accumulate([&] { return cross_entropy((*twin)(data.x), data.y); });
  const float norm = step.unscale_and_clip().item();
  EXPECT_GT(norm, 1e-3f);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(optim::clip_grad_norm(step.optimizer().params(), inf), norm);
  EXPECT_EQ(by_hand.unscale_and_clip().item(), norm);
  const float clipped_norm = optim::clip_grad_norm(by_hand.optimizer().params(), 1e-3f);
  EXPECT_EQ(clipped_norm, norm);
  EXPECT_NEAR(optim::clip_grad_norm(by_hand.optimizer().params(), inf), 1e-3f, 1e-5f);
  EXPECT_TRUE(step.apply());
  EXPECT_TRUE(by_hand.apply());
  EXPECT_EQ(step.optimizer().steps(), 1);
  EXPECT_EQ(test::parameter_values(*model), test::parameter_values(*twin));
}

TEST(TrainStep, SkipsAnOverflowedStepAndHoldsTheSchedule) {
  auto model = models::make_model("mlp", 2);
  TrainStep step(*model, StepConfig{.precision = "fp16", .lr = 1e-2f, .scheduler = "cosine",
                                    .scheduler_steps = 4});
  const std::vector<std::vector<float>> before = test::parameter_values(*model);
  const Batch data = batch(2);
  // A loss multiplied by 1e30 overflows every fp16 gradient: the step must be skipped.
  step.accumulate([&] { return cross_entropy((*model)(data.x), data.y) * 1e30f; });
  EXPECT_FALSE(std::isfinite(step.unscale_and_clip().item()));
  const double scale = step.scaler().get_scale();
  EXPECT_FALSE(step.apply());
  EXPECT_EQ(step.optimizer().steps(), 0);
  EXPECT_EQ(step.optimizer().lr(), 1e-2f);  // the schedule did not advance
  EXPECT_LT(step.scaler().get_scale(), scale);
  EXPECT_EQ(test::parameter_values(*model), before);
  // The next clean step applies.
  const StepOutcome ok = step.run([&] { return cross_entropy((*model)(data.x), data.y); });
  EXPECT_TRUE(ok.applied);
  EXPECT_TRUE(std::isfinite(ok.grad_norm.item()));
  EXPECT_NE(test::parameter_values(*model), before);
}

TEST(TrainStep, TheConfigReachesScalerOptimizerAndPrecision) {
  auto model = models::make_model("mlp", 0);
  TrainStep step(*model, StepConfig{.precision = "fp16", .optimizer = "sgd", .lr = 0.25f,
                                    .loss_scaling = "predictive", .scaler_growth_interval = 7});
  EXPECT_EQ(step.scaler().options().mode, amp::ScalingMode::predictive);
  EXPECT_EQ(step.scaler().options().growth_interval, 7);
  EXPECT_TRUE(step.scaler().is_enabled());
  EXPECT_EQ(step.optimizer().lr(), 0.25f);
  EXPECT_NE(dynamic_cast<optim::SGD*>(&step.optimizer()), nullptr);
  EXPECT_TRUE(step.autocast());
  EXPECT_EQ(step.compute_dtype(), DType::f16);
  EXPECT_EQ(step.precision_name(), "fp16");
  EXPECT_EQ(step.scheduler(), nullptr);

  auto other = models::make_model("mlp", 0);
  TrainStep automatic(*other, StepConfig{.precision = "auto"});
  EXPECT_NE(automatic.precision_name(), "auto");
  EXPECT_FALSE(automatic.auto_reason().empty());
}

TEST(TrainStep, BadConfigsNameTheFlag) {
  auto model = models::make_model("mlp", 0);
  auto message = [&](StepConfig c) {
    try {
      TrainStep step(*model, c);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({.precision = "fp9"}).find("fp9"), std::string::npos);
  EXPECT_NE(message({.precision = "fp8-delayed", .fp8_amax_history = 0}).find("--fp8-amax-history"),
            std::string::npos);
  EXPECT_NE(message({.precision = "fp8", .fp8_margin = -1}).find("--fp8-margin"), std::string::npos);
  EXPECT_NE(message({.precision = "fp8", .fp8_format = "e5m2"}).find("--fp8-format"), std::string::npos);
  EXPECT_NE(message({.lr = -1.0f}).find("--lr"), std::string::npos);
  EXPECT_NE(message({.optimizer = "lamb"}).find("--optimizer"), std::string::npos);
  EXPECT_NE(message({.clip = std::nanf("")}).find("--clip"), std::string::npos);
  EXPECT_NE(message({.accum = 0}).find("--accum"), std::string::npos);
  EXPECT_NE(message({.loss_scaling = "static"}).find("--loss-scaling"), std::string::npos);
  EXPECT_NE(message({.scaler_growth_interval = 0}).find("--scaler-growth-interval"), std::string::npos);
}

// The fp8 skip rule: a NaN in the input makes its cast's amax NaN; the step is skipped as the
// GradScaler skips (counted, weights unchanged) and every fp8 scale, amax history and the
// other roles' state stay as they were; the next clean step trains again.
TEST(TrainStep, Fp8SkipsAStepWhoseAmaxIsNotFiniteAndKeepsTheScales) {
  for (const char* precision : {"fp8", "fp8-delayed"}) {
    SCOPED_TRACE(precision);
    // No ReLU before the first fp8 layer ("1"): the NaN of one input row reaches its cast.
    auto model = nn::sequential({std::make_shared<nn::Linear>(784, 32, true, 1),
                                 std::make_shared<nn::Linear>(32, 32, true, 2),
                                 std::make_shared<nn::Linear>(32, 32, true, 3),
                                 std::make_shared<nn::Linear>(32, 10, true, 4)});
    TrainStep step(*model, StepConfig{.precision = precision, .optimizer = "adam", .lr = 1e-3f});
    ASSERT_NE(step.fp8_layers(), nullptr);
    const Batch clean = batch(1);
    EXPECT_TRUE(step.run([&] { return cross_entropy((*model)(clean.x), clean.y); }).applied);
    std::map<std::string, std::vector<float>> before;
    for (const auto& [name, t] : step.fp8_layers()->state_tensors()) {
      if (name.find("history") != std::string::npos || name.find("scale") != std::string::npos) {
        before[name] = t.to_vector();
      }
    }
    const auto weights = test::parameter_values(*model);
    std::vector<float> v = batch(2).x.to_vector();
    v[5] = std::numeric_limits<float>::quiet_NaN();
    const Tensor poisoned = Tensor::from_vector(v, {8, 784});
    EXPECT_FALSE(step.run([&] { return cross_entropy((*model)(poisoned), clean.y); }).applied);
    EXPECT_EQ(step.scaler().stats().skipped_steps, 1);
    EXPECT_EQ(step.scaler().get_scale(), 1.0);
    EXPECT_EQ(test::parameter_values(*model), weights);
    for (const auto& [name, t] : step.fp8_layers()->state_tensors()) {
      if (before.count(name) != 0) {
        EXPECT_EQ(t.to_vector(), before[name]) << name;
      }
    }
    EXPECT_TRUE(step.run([&] { return cross_entropy((*model)(clean.x), clean.y); }).applied);
    EXPECT_NE(test::parameter_values(*model), weights);
  }
}

}  // namespace
}  // namespace mixprec::train
