// RegressionTask (train/task.h): the loss is the MSE on standardised targets; evaluation reports
// MSE and R² in the target's own units against hand-computed values; and the mlp sized by its
// data (models::ModelOptions inputs/outputs) next to a fixed-shape model that refuses to be.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/task.h"
#include "mixprec/train/trainer.h"

namespace mixprec::train {
namespace {

data::Batch batch_of(std::vector<float> standardised) {
  data::Batch b;
  b.values = std::move(standardised);
  return b;
}

TEST(TrainRegressionTask, LossIsTheMeanSquaredErrorOnStandardisedTargets) {
  const RegressionTask task(100.0f, 10.0f);
  EXPECT_EQ(task.kind(), models::TaskKind::regression);
  const Tensor out = Tensor::from_vector({1.0f, -1.0f, 0.5f}, {3, 1});
  const float loss = task.loss(out, batch_of({0.0f, 0.0f, 0.5f})).item();
  EXPECT_FLOAT_EQ(loss, 2.0f / 3.0f);
  EXPECT_THROW(task.loss(Tensor::from_vector({1, 2, 3, 4}, {2, 2}), batch_of({0, 0})), ShapeError);
}

TEST(TrainRegressionTask, EvaluationReportsMseAndR2InTheTargetsUnits) {
  // Targets y = 100 + 10 z: z = -1, 0, 1 -> y = 90, 100, 110 (mean 100, SST 200).
  // Outputs z' = -1, 0.5, 1 -> y' = 90, 105, 110: SSE 25, MSE 25 / 3, R² = 1 - 25 / 200.
  const RegressionTask task(100.0f, 10.0f);
  const std::unique_ptr<Evaluation> e = task.evaluation();
  e->add(Tensor::from_vector({-1.0f, 0.5f}, {2, 1}), batch_of({-1.0f, 0.0f}));
  e->add(Tensor::from_vector({1.0f}, {1, 1}).to(DType::bf16), batch_of({1.0f}));
  EpochMetrics m;
  e->write(m);
  EXPECT_NEAR(m.mse, 25.0 / 3.0, 1e-9);
  EXPECT_NEAR(m.r2, 1.0 - 25.0 / 200.0, 1e-12);
  EXPECT_NEAR(m.test_loss, 0.25 / 3.0, 1e-9);
  EXPECT_EQ(e->confusion(), nullptr);
}

TEST(TrainRegressionTask, RejectsADegenerateScale) {
  EXPECT_THROW(RegressionTask(0.0f, 0.0f), ValueError);
  EXPECT_THROW(RegressionTask(std::nanf(""), 1.0f), ValueError);
}

TEST(ModelsSizedByData, MlpFollowsTheDataAndFixedModelsRefuse) {
  models::ModelOptions o;
  o.inputs = 4;
  o.outputs = 3;
  const auto mlp = models::make_model("mlp", o);
  EXPECT_EQ(mlp->parameter_count(), 4 * 256 + 256 + 256 * 128 + 128 + 128 * 3 + 3);
  EXPECT_EQ(models::input_shape(models::model_spec("mlp"), models::resolve_options(models::model_spec("mlp"), o)),
            (std::vector<std::int64_t>{4}));
  EXPECT_EQ(models::make_model("mlp", std::uint64_t{0})->parameter_count(), 235146);  // 784-256-128-10
  EXPECT_THROW(models::make_model("cnn", o), ValueError);
  EXPECT_STREQ(models::name(models::TaskKind::regression), "regression");
}

}  // namespace
}  // namespace mixprec::train
