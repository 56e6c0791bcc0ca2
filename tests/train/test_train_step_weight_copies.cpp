// The 16-bit weight copies belong to the TrainStep (runtime::WeightCopies): its autocast regions make
// them, its optimizer rewrites them, its evaluation may borrow them, and nothing lands in the
// process-wide store that plain autocast code uses.
#include <gtest/gtest.h>

#include "mixprec/models/zoo.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/weight_copies.h"
#include "mixprec/train/train_step.h"

namespace mixprec::train {
namespace {

TEST(TrainStepWeightCopies, TheStepOwnsTheCopiesItsOptimizerWrites) {
  runtime::WeightCopies::process_default().clear();
  auto model = models::make_model("mlp", 5);
  TrainStep step(*model, StepConfig{.precision = "bf16", .optimizer = "adam", .lr = 1e-3f});
  const Tensor x = Tensor::randn({4, 784}, 6);
  const std::vector<std::int64_t> y{1, 2, 3, 4};
  const auto loss = [&] { return cross_entropy((*model)(x), y); };
  const Tensor w = model->parameters().front();

  for (int s = 0; s < 2; ++s) {
    runtime::reset_cast_stats();
    step.run(loss);
    // The copy the optimizer wrote is the exact cast of the updated f32 weight, in the step's store.
    const Tensor copy = step.weight_copies().current(w, DType::bf16);
    ASSERT_TRUE(copy.defined());
    EXPECT_EQ(copy.to(DType::f32).to_vector(), w.to(DType::bf16).to(DType::f32).to_vector());
    EXPECT_FALSE(runtime::WeightCopies::process_default().current(w, DType::bf16).defined());
  }
  // The next forward, lent the step's copies, casts no weight: only the input.
  runtime::reset_cast_stats();
  {
    const runtime::UseWeightCopies copies(step.weight_copies());
    runtime::Autocast region(true, DType::bf16);
    (void)(*model)(x);
  }
  const std::uint64_t lent = runtime::cast_stats().casts;
  // Without them, every weight is cast afresh (and kept in the process default).
  runtime::reset_cast_stats();
  {
    runtime::Autocast region(true, DType::bf16);
    (void)(*model)(x);
  }
  EXPECT_GT(runtime::cast_stats().casts, lent);
  EXPECT_TRUE(runtime::WeightCopies::process_default().current(w, DType::bf16).defined());
  runtime::WeightCopies::process_default().clear();
}

}  // namespace
}  // namespace mixprec::train
