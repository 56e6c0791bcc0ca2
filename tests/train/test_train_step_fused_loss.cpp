// The training step's fused cross-entropy (Task::training_loss told TrainStep::loss_gradient()):
// the promise holds in every precision mode with accumulation (the verbose log shows no rescale
// of the saved gradient), so losses and parameters are bit for bit those of the plain loss, on
// the seed MLP and on gpt-mini; and the step's memory peak does not grow (the logits die before
// backward instead of living through it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/backend.h"
#include "mixprec/core/memory.h"
#include "mixprec/core/verbose.h"
#include "mixprec/models/zoo.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/task.h"
#include "mixprec/train/train_step.h"
#include "train/trainer_test_util.h"

namespace mixprec::train {
namespace {

struct Trainee {
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<Task> task;
};

constexpr std::int64_t kContext = 16;

Trainee make(const std::string& name) {
  if (name == "mlp") return {models::make_model("mlp", 3), std::make_shared<ClassificationTask>(10)};
  models::ModelOptions o;
  o.seed = 3;
  o.context = kContext;
  o.layers = 1;
  o.heads = 2;
  o.width = 16;
  return {models::make_model(name, o), make_task(models::model_spec(name))};
}

data::Batch batch(const std::string& name, int seed) {
  data::Batch b;
  if (name == "mlp") {
    b.inputs = Tensor::randn({8, 784}, static_cast<std::uint64_t>(seed));
    for (int i = 0; i < 8; ++i) b.targets.push_back((i * 7 + seed) % 10);
    return b;
  }
  std::vector<float> tokens;
  for (int i = 0; i < 4 * kContext; ++i) {
    tokens.push_back(static_cast<float>((i * 31 + seed * 7) % 256));
    b.targets.push_back((i * 17 + seed) % 256);
  }
  b.inputs = Tensor::from_vector(tokens, {4, kContext});
  return b;
}

TEST(TrainStepFusedLoss, KeepsThePromiseAndThePlainLossBits) {
  for (const char* name : {"mlp", "gpt-mini"}) {
    for (const char* precision : {"fp32", "bf16", "fp16"}) {
      SCOPED_TRACE(std::string(name) + " " + precision);
      const StepConfig config{.precision = precision, .optimizer = "adamw", .lr = 1e-2f,
                              .clip = 0.5f, .accum = 2, .scheduler = "none"};
      Trainee plain = make(name), fused = make(name);
      TrainStep plain_step(*plain.model, config), fused_step(*fused.model, config);
      for (int s = 0; s < 3; ++s) {
        for (int micro = 0; micro < 2; ++micro) {
          const data::Batch b = batch(name, 10 * s + micro);
          const double want = plain_step.accumulate(
              [&] { return plain.task->loss((*plain.model)(b.inputs), b); });
          set_verbose(true);
          ::testing::internal::CaptureStderr();
          const double got = fused_step.accumulate([&] {
            return fused.task->training_loss((*fused.model)(b.inputs), b,
                                             fused_step.loss_gradient());
          });
          const std::string log = ::testing::internal::GetCapturedStderr();
          set_verbose(false);
          EXPECT_EQ(got, want) << "step " << s << " micro-batch " << micro;
          // A kept promise returns the saved gradient: the cpu logs a rescale only otherwise
          // (another backend, MIXPREC_BACKEND=ref say, logs every call it runs).
          if (std::string(kernels::backend().name) == "cpu") {
            EXPECT_EQ(log.find("rescale_unless_equal"), std::string::npos) << log.substr(0, 2000);
          }
        }
        EXPECT_EQ(fused_step.unscale_and_clip().item(), plain_step.unscale_and_clip().item());
        EXPECT_EQ(fused_step.apply(), plain_step.apply());
      }
      EXPECT_EQ(test::parameter_values(*fused.model), test::parameter_values(*plain.model));
      EXPECT_EQ(fused_step.scaler().get_scale(), plain_step.scaler().get_scale());
    }
  }
}

// The plain loss keeps the logits for its backward, which then allocates their gradient beside
// them; the fused loss allocates the gradient in the forward and lets the logits go.
TEST(TrainStepFusedLoss, TheStepsMemoryPeakDoesNotGrow) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    std::size_t peaks[2] = {0, 0};
    for (bool use_fused : {false, true}) {
      Trainee s = make("gpt-mini");
      TrainStep step(*s.model, StepConfig{.precision = precision, .scheduler = "none"});
      const data::Batch b = batch("gpt-mini", 1);
      // The second step is measured: the optimizer's state, the caches and the step's loss
      // gradient are in place by then. The plain loss peaks in its backward (logits, their
      // gradient, the per-row gradients), the fused one in its forward (the same three).
      for (int i = 0; i < 2; ++i) {
        reset_peak_memory();
        const std::size_t before = memory_stats().total_current;
        step.accumulate([&] {
          return use_fused ? s.task->training_loss((*s.model)(b.inputs), b, step.loss_gradient())
                           : s.task->loss((*s.model)(b.inputs), b);
        });
        peaks[use_fused ? 1 : 0] = memory_stats().total_peak - before;
        step.unscale_and_clip();
        step.apply();
      }
    }
    EXPECT_LE(peaks[1], peaks[0]) << "plain " << peaks[0] << " bytes, fused " << peaks[1];
  }
}

TEST(TrainStepFusedLoss, TheLossGradientIsOneTimesScaleOverAccum) {
  auto model = models::make_model("mlp", 3);
  TrainStep fp32(*model, StepConfig{.precision = "fp32", .accum = 4, .scheduler = "none"});
  EXPECT_EQ(fp32.loss_gradient().item(), 0.25f);
  auto model16 = models::make_model("mlp", 3);
  TrainStep fp16(*model16, StepConfig{.precision = "fp16", .accum = 3, .scheduler = "none"});
  const float scale = static_cast<float>(fp16.scaler().get_scale());
  EXPECT_EQ(fp16.loss_gradient().item(), scale * (1.0f / 3.0f));
}

}  // namespace
}  // namespace mixprec::train
