// TrainStep with graphs on (train/step_graphs.h), on devsim, whose capture records the kernel
// calls and replays them with the arguments they were captured with, as a CUDA graph does: a
// replayed step must give the eager step's losses and parameters bit for bit, over steps whose
// batches change (so a value baked into the graph that should not be shows), with a re-capture
// when the batch shape changes, and a step that cannot be captured (dropout's host seed) must
// run eagerly, say why, and train exactly as without graphs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend_scope.h"
#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/task.h"
#include "mixprec/train/train_step.h"

namespace mixprec::train {
namespace {

constexpr std::int64_t kContext = 16;

struct Trainee {
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<Task> task;
};

Trainee make(const std::string& name, float dropout = 0.0f) {
  models::ModelOptions o;
  o.seed = 5;
  o.dropout = dropout;
  if (name == "gpt-mini") {
    o.context = kContext;
    o.layers = 1;
    o.heads = 2;
    o.width = 16;
  }
  return {models::make_model(name, o), make_task(models::model_spec(name))};
}

data::Batch batch(const std::string& name, int seed, std::int64_t rows) {
  data::Batch b;
  if (name == "gpt-mini") {
    std::vector<float> tokens;
    for (std::int64_t i = 0; i < rows * kContext; ++i) {
      tokens.push_back(static_cast<float>((i * 31 + seed * 7) % 256));
      b.targets.push_back((i * 17 + seed) % 256);
    }
    b.inputs = Tensor::from_vector(tokens, {rows, kContext});
    return b;
  }
  const models::ModelSpec spec = models::model_spec(name);
  Shape shape{rows};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  b.inputs = Tensor::randn(shape, static_cast<std::uint64_t>(seed));
  for (std::int64_t i = 0; i < rows; ++i) b.targets.push_back((i * 7 + seed) % spec.num_classes);
  return b;
}

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor host = t.to(Device{DeviceType::cpu, 0}).contiguous();
  const auto* p = static_cast<const unsigned char*>(host.data_ptr());
  return {p, p + host.numel() * static_cast<std::int64_t>(size_of(host.dtype()))};
}

struct TrainingRun {
  std::vector<double> losses;  // each micro-batch's loss, then each step's gradient norm
  std::vector<std::vector<unsigned char>> params;
  TrainStep::GraphStats graphs;
};

// `steps` optimizer steps of `name` in `precision`, batch row counts from `rows` in turn.
TrainingRun train(const std::string& name, const std::string& precision, const std::string& graphs,
                  const std::vector<std::int64_t>& rows, int steps, float dropout = 0.0f,
                  int accum = 1) {
  Trainee t = make(name, dropout);
  const StepConfig config{.precision = precision, .optimizer = "adamw", .lr = 1e-2f,
                          .clip = 0.5f, .accum = accum, .scheduler = "none", .graphs = graphs};
  TrainStep step(*t.model, config);
  TrainingRun r;
  const TrainStep::BatchLoss loss_of = [&](const data::Batch& given) {
    return t.task->training_loss((*t.model)(given.inputs), given, step.loss_gradient());
  };
  for (int s = 0; s < steps; ++s) {
    // Each micro-batch its own data (a graph replaying a stale batch would show).
    for (int m = 0; m < accum; ++m) {
      const int seed = s * accum + m;
      const data::Batch b = batch(name, seed, rows[static_cast<std::size_t>(seed) % rows.size()]);
      r.losses.push_back(step.accumulate(b, loss_of));
    }
    r.losses.push_back(static_cast<double>(step.unscale_and_clip().item()));
    step.apply();
  }
  for (const Tensor& p : t.model->parameters()) r.params.push_back(bytes_of(p));
  r.graphs = step.graph_stats();
  return r;
}

void expect_same(const TrainingRun& eager, const TrainingRun& graphed) {
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  for (std::size_t s = 0; s < eager.losses.size(); ++s) {
    EXPECT_EQ(graphed.losses[s], eager.losses[s]) << "step " << s;
  }
  ASSERT_EQ(eager.params.size(), graphed.params.size());
  for (std::size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(eager.params[i] == graphed.params[i]) << "parameter " << i << " differs";
  }
}

TEST(StepGraphs, ReplayedStepsAreTheEagerStepsBitForBit) {
  testing::BackendScope devsim("devsim");
  for (const char* name : {"mlp", "cnn", "gpt-mini"}) {
    for (const char* precision : {"fp32", "bf16", "fp16"}) {
      SCOPED_TRACE(std::string(name) + " " + precision);
      const TrainingRun eager = train(name, precision, "off", {4}, 5);
      const TrainingRun graphed = train(name, precision, "on", {4}, 5);
      expect_same(eager, graphed);
      EXPECT_EQ(graphed.graphs.refusal, "");
      // Step 0 eager (the warm-up), step 1 eager (the rehearsal), step 2 captured, steps 3-4
      // replayed; fp16's scale may change (a new key: warm-up, rehearsal, capture again).
      EXPECT_GE(graphed.graphs.captures, 1u);
      EXPECT_GE(graphed.graphs.replays, 1u);
      if (std::string(precision) != "fp16") {
        EXPECT_EQ(graphed.graphs.captures, 1u);
        EXPECT_EQ(graphed.graphs.replays, 2u);
      }
      EXPECT_EQ(eager.graphs.captures, 0u);
    }
  }
}

TEST(StepGraphs, ANewBatchShapeIsCapturedAgainAndBothReplay) {
  testing::BackendScope devsim("devsim");
  // Rows 4, 3, 4, 3, ...: each shape is warmed up, rehearsed, captured, then replayed twice.
  const TrainingRun eager = train("gpt-mini", "bf16", "off", {4, 3}, 10);
  const TrainingRun graphed = train("gpt-mini", "bf16", "on", {4, 3}, 10);
  expect_same(eager, graphed);
  EXPECT_EQ(graphed.graphs.captures, 2u);
  EXPECT_EQ(graphed.graphs.replays, 4u);
}

TEST(StepGraphs, DropoutIsRefusedBeforeAnyCaptureAndTrainsAsWithoutGraphs) {
  testing::BackendScope devsim("devsim");
  ::testing::internal::CaptureStderr();
  const TrainingRun graphed = train("gpt-mini", "bf16", "on", {4}, 4, 0.1f);
  const std::string log = ::testing::internal::GetCapturedStderr();
  const TrainingRun eager = train("gpt-mini", "bf16", "off", {4}, 4, 0.1f);
  // Known from the rehearsal of the first step, so the capture never ran the ops' host code
  // (dropout's call counter) a second time: the masks, and so every bit, are the eager run's.
  expect_same(eager, graphed);
  EXPECT_EQ(graphed.graphs.captures, 0u);
  EXPECT_NE(graphed.graphs.refusal.find("dropout"), std::string::npos) << graphed.graphs.refusal;
  EXPECT_NE(log.find("--cuda-graphs on: the step runs without a graph"), std::string::npos) << log;
}

TEST(StepGraphs, AccumulationReplaysTheFirstAndTheLaterMicroBatchesBitForBit) {
  testing::BackendScope devsim("devsim");
  for (const char* precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    // Three micro-batches a step: the first graph assigns the gradients, the second, captured
    // adding into them, serves micro-batches 2 and 3.
    const TrainingRun eager = train("gpt-mini", precision, "off", {4}, 5, 0.0f, 3);
    const TrainingRun graphed = train("gpt-mini", precision, "on", {4}, 5, 0.0f, 3);
    expect_same(eager, graphed);
    EXPECT_EQ(graphed.graphs.refusal, "");
    if (std::string(precision) == "bf16") {
      // First micro-batches: eager, rehearsal, capture, then 2 replays. The later ones follow
      // a captured or replayed first one: eager and rehearsal in step 2, captured in step 3
      // and replayed after: 2 captures, 2 + 3 replays.
      EXPECT_EQ(graphed.graphs.captures, 2u);
      EXPECT_EQ(graphed.graphs.replays, 5u);
    }
  }
}

TEST(StepGraphs, ConfigurationsThatRuleGraphsOutSayWhy) {
  testing::BackendScope devsim("devsim");
  Trainee f = make("mlp");
  TrainStep fp8(*f.model, StepConfig{.precision = "fp8", .graphs = "on"});
  EXPECT_NE(fp8.graph_stats().refusal.find("fp8"), std::string::npos);
}

TEST(StepGraphs, AreRefusedOnTheCpuAndForABadValue) {
  Trainee t = make("mlp");
  try {
    TrainStep step(*t.model, StepConfig{.precision = "bf16", .graphs = "on"});
    FAIL() << "graphs on the cpu were accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("add --device cuda (or --device devsim"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(TrainStep(*t.model, StepConfig{.precision = "bf16", .graphs = "yes"}), ValueError);
}

}  // namespace
}  // namespace mixprec::train
