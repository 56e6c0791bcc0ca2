// The precision autopilot (--precision auto-layer): each move rule fires on the evidence it is
// written for and only on the layer concerned; policy files round-trip and are refused with the
// file and layer named; the state survives a checkpoint round trip.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/gpt.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/train_step.h"

namespace mixprec::train {
namespace {

std::vector<std::int64_t> labels(std::int64_t n) {
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) y.push_back((i * 7) % 10);
  return y;
}

// Two Linear layers; `gain` multiplies the input of the first, so a large gain overflows fp16
// in layer "0" only (the LayerNorm after it brings the values back).
std::shared_ptr<nn::Module> two_layers(float gain, std::uint64_t seed = 1) {
  class Gain : public nn::Module {
   public:
    explicit Gain(float g) : g_(g) {}
    Tensor forward(const Tensor& x) override { return x * g_; }
    std::string type_name() const override { return "Gain"; }

   private:
    float g_;
  };
  return nn::sequential({std::make_shared<Gain>(gain), std::make_shared<nn::Linear>(32, 64, true, seed),
                         std::make_shared<nn::LayerNorm>(64), std::make_shared<nn::ReLU>(),
                         std::make_shared<nn::Linear>(64, 10, true, seed + 1)});
}

DType dtype_of(const LayerPolicy& p, const std::string& layer) {
  for (const auto& [path, d] : p.layers) {
    if (path == layer) return d;
  }
  ADD_FAILURE() << "no layer " << layer;
  return DType::f32;
}

// Runs `steps` training steps; loss_gain multiplies the loss (tiny: gradients near fp16's bottom).
void train(TrainStep& step, nn::Module& model, int steps, float loss_gain = 1.0f) {
  const Tensor x = Tensor::randn({16, 32}, 5);
  const auto y = labels(16);
  for (int i = 0; i < steps; ++i) {
    step.run([&] { return cross_entropy(model(x), y) * loss_gain; });
  }
}

TEST(PrecisionAutopilot, StartsEveryGemmLayerInTheComputeDtype) {
  auto model = two_layers(1.0f);
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  ASSERT_NE(step.autopilot(), nullptr);
  const LayerPolicy p = step.autopilot()->policy();
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.layers[0].first, "1");
  EXPECT_EQ(p.layers[1].first, "4");
  EXPECT_EQ(dtype_of(p, "1"), DType::f16);
  EXPECT_EQ(dtype_of(p, "4"), DType::f16);
  EXPECT_TRUE(step.scaler().is_enabled());
  // Other modes have no autopilot.
  auto plain = two_layers(1.0f);
  EXPECT_EQ(TrainStep(*plain, StepConfig{.precision = "fp16"}).autopilot(), nullptr);
}

TEST(PrecisionAutopilot, ForwardOverflowMovesOnlyTheLayerThatOverflowedToBf16) {
  auto model = two_layers(3e4f);  // layer "1" sees inputs ~3e4: its outputs exceed 65504
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  train(step, *model, 1);
  const PrecisionAutopilot& pilot = *step.autopilot();
  ASSERT_EQ(pilot.moves().size(), 1u);
  const LayerMove& m = pilot.moves()[0];
  EXPECT_EQ(m.step, 0);
  EXPECT_EQ(m.layer, "1");
  EXPECT_EQ(m.from, DType::f16);
  EXPECT_EQ(m.to, DType::bf16);
  EXPECT_NE(m.reason.find("Inf/NaN from finite inputs"), std::string::npos) << m.reason;
  EXPECT_EQ(dtype_of(pilot.policy(), "4"), DType::f16);  // its NaN inputs are not its fault
  // From then on the steps are applied: bf16 holds the range.
  const std::int64_t skipped = step.scaler().stats().skipped_steps;
  train(step, *model, 5);
  EXPECT_EQ(step.scaler().stats().skipped_steps, skipped);
  EXPECT_EQ(pilot.moves().size(), 1u);
  EXPECT_DOUBLE_EQ(pilot.sixteen_bit_flop_share(), 1.0);
}

TEST(PrecisionAutopilot, NoMovesWhenEverythingFitsFp16) {
  auto model = two_layers(1.0f);
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  train(step, *model, 25);
  EXPECT_TRUE(step.autopilot()->moves().empty());
  EXPECT_EQ(step.scaler().stats().skipped_steps, 0);
}

TEST(PrecisionAutopilot, GradientsRunningOffFp16sBottomMoveALayerUp) {
  auto model = two_layers(1.0f);
  // A loss scaled by 2^-30: at the scaler's initial 2^16 the output gradients (about 2^-4 to
  // 2^-8 unscaled) sit around 2^-18 to 2^-22, fp16's subnormal range.
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  train(step, *model, 1, 0x1p-30f);
  const auto& moves = step.autopilot()->moves();
  ASSERT_FALSE(moves.empty());
  bool last_layer = false;
  for (const LayerMove& m : moves) {
    EXPECT_EQ(m.to, DType::bf16);
    EXPECT_NE(m.reason.find("fp16 subnormals"), std::string::npos) << m.reason;
    last_layer = last_layer || m.layer == "4";
  }
  EXPECT_TRUE(last_layer);
}

TEST(PrecisionAutopilot, RepeatedSkipsMoveTheFp16LayerClosestTo65504) {
  auto model = two_layers(1.0f);
  // An Inf injected into the gradients every step: the scaler skips them all.
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16", .inject_overflow = "1"});
  train(step, *model, 10);
  const auto& moves = step.autopilot()->moves();
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].step, 9);  // the 10th skip of the window
  EXPECT_NE(moves[0].reason.find("skipped 10 of the last 10 steps"), std::string::npos) << moves[0].reason;
}

TEST(PrecisionAutopilot, ARaisedLayerComesBackDownAfterCleanSamplesAndWaitsLongerNextTime) {
  auto model = two_layers(1.0f);
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  PrecisionAutopilot& pilot = *step.autopilot();
  // As if layer "4" had been raised to bf16 before (a state as a checkpoint holds it).
  std::string state = pilot.state();
  const std::string from = R"("dtype":"fp16","flops":0.0,"path":"4")";
  const auto at = state.find(from);
  ASSERT_NE(at, std::string::npos) << state;
  state.replace(at, from.size(), R"("dtype":"bf16","flops":0.0,"path":"4")");
  pilot.load_state(state);
  EXPECT_EQ(dtype_of(pilot.policy(), "4"), DType::bf16);
  // Sampled on steps 0, 10, 20, ...; after 10 clean samples (the probation) it moves down.
  train(step, *model, 90);
  ASSERT_EQ(pilot.moves().size(), 0u);
  train(step, *model, 1);
  ASSERT_EQ(pilot.moves().size(), 1u);
  EXPECT_EQ(pilot.moves()[0].step, 90);
  EXPECT_EQ(pilot.moves()[0].layer, "4");
  EXPECT_EQ(pilot.moves()[0].to, DType::f16);
  EXPECT_NE(pilot.moves()[0].reason.find("over its last 10 sampled steps"), std::string::npos);
  // A move up after coming down doubles the probation (in the saved state).
  train(step, *model, 9);
  train(step, *model, 1, 0x1p-30f);  // step 100, sampled
  ASSERT_GE(pilot.moves().size(), 2u);
  EXPECT_NE(pilot.state().find(R"("probation":20)"), std::string::npos) << pilot.state();
}

TEST(PrecisionAutopilot, StateRoundTripsAndIsCheckedAgainstTheModel) {
  auto model = two_layers(3e4f);
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  train(step, *model, 3);
  const std::string state = step.autopilot()->state();

  auto other = two_layers(3e4f);
  TrainStep fresh(*other, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  fresh.autopilot()->load_state(state);
  EXPECT_EQ(fresh.autopilot()->state(), state);
  EXPECT_EQ(fresh.autopilot()->policy().to_json_text(), step.autopilot()->policy().to_json_text());

  auto mlp = models::make_model("mlp", 1);
  TrainStep wrong(*mlp, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  EXPECT_THROW(wrong.autopilot()->load_state(state), StateError);
  auto bf16_model = two_layers(3e4f);
  TrainStep bf16(*bf16_model, StepConfig{.precision = "auto-layer", .compute = "bf16"});
  EXPECT_THROW(bf16.autopilot()->load_state(state), StateError);
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/autopilot_" + name;
}

TEST(LayerPolicy, RoundTripsThroughItsFileAndReplaysFrozen) {
  auto model = two_layers(3e4f);
  TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16"});
  train(step, *model, 1);
  LayerPolicy p = step.autopilot()->policy();
  p.model = "two-layers";
  const std::string path = temp_path("policy.json");
  p.write(path);
  const LayerPolicy back = LayerPolicy::read(path);
  EXPECT_EQ(back.to_json_text(), p.to_json_text());
  EXPECT_EQ(back.moves.size(), 1u);

  // Replayed from the first step: no skipped step, no moves, the same dtypes.
  auto replayed = two_layers(3e4f);
  TrainStep again(*replayed, StepConfig{.precision = "auto-layer", .compute = "fp16", .layer_policy = path});
  EXPECT_TRUE(again.autopilot()->frozen());
  EXPECT_EQ(dtype_of(again.autopilot()->policy(), "1"), DType::bf16);
  train(again, *replayed, 5);
  EXPECT_EQ(again.scaler().stats().skipped_steps, 0);
  EXPECT_TRUE(again.autopilot()->moves().empty());
  EXPECT_DOUBLE_EQ(again.autopilot()->sixteen_bit_flop_share(), 1.0);
  std::remove(path.c_str());
}

void expect_refused(const std::string& text, const std::string& needle) {
  const std::string path = temp_path("bad.json");
  io::write_file_atomically(path, text);
  auto model = two_layers(1.0f);
  try {
    TrainStep step(*model, StepConfig{.precision = "auto-layer", .compute = "fp16", .layer_policy = path});
    ADD_FAILURE() << "accepted: " << text;
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
  std::remove(path.c_str());
}

TEST(LayerPolicy, BadFilesAreRefusedNamingTheFileAndTheLayer) {
  const std::string head = R"({"format": "mixprec-layer-policy", "version": 1, "compute": "fp16", )";
  expect_refused(head + R"("layers": {"1": "bf16", "classifier.9": "fp32"}})",
                 "names layer 'classifier.9', which model");
  expect_refused(head + R"("layers": {"1": "fp4"}})", "layer '1': unknown dtype 'fp4'");
  expect_refused(head + R"("layers": {"1": "fp8"}})", "puts layer '1' in fp8");  // fp8 runs only
  expect_refused(head + R"("layers": {"1": 16}})", "layer '1': the dtype must be a string");
  expect_refused(head + R"("layers": [1]})", "\"layers\" must be an object");
  expect_refused(R"({"format": "something-else"})", "is not a layer policy");
  expect_refused("{ not json", "is not valid JSON");
  auto model = two_layers(1.0f);
  EXPECT_THROW(TrainStep(*model, StepConfig{.precision = "auto-layer", .layer_policy = temp_path("missing.json")}),
               ValueError);
}

TEST(LayerPolicy, AFileNamingAnOlderQkvProjectionIsRefusedNamingTheFusedLayer) {
  // q, k and v are one Linear with one dtype: an older file may set them apart, so it is refused.
  const std::string path = temp_path("older-qkv.json");
  io::write_file_atomically(path, R"({"format": "mixprec-layer-policy", "version": 1, "compute": "bf16", )"
                                  R"("layers": {"blocks.0.attn.k_proj": "fp32"}})");
  nn::GPT gpt(nn::GptConfig{.vocab_size = 16, .context = 8, .d_model = 8, .n_heads = 2, .n_layers = 1});
  try {
    TrainStep step(gpt, StepConfig{.precision = "auto-layer", .layer_policy = path});
    ADD_FAILURE() << "accepted a policy naming blocks.0.attn.k_proj";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("names layer 'blocks.0.attn.k_proj'"), std::string::npos) << what;
    EXPECT_NE(what.find("'blocks.0.attn.qkv_proj'"), std::string::npos) << what;
  }
  io::write_file_atomically(path, R"({"format": "mixprec-layer-policy", "version": 1, "compute": "bf16", )"
                                  R"("layers": {"blocks.0.attn.qkv_proj": "fp32"}})");
  EXPECT_NO_THROW(TrainStep(gpt, StepConfig{.precision = "auto-layer", .layer_policy = path}));
  std::remove(path.c_str());
}

TEST(PrecisionAutopilot, FlagsBelongToAutoLayer) {
  auto model = two_layers(1.0f);
  EXPECT_THROW(TrainStep(*model, StepConfig{.precision = "fp16", .compute = "fp16"}), ValueError);
  EXPECT_THROW(TrainStep(*model, StepConfig{.precision = "bf16", .layer_policy = "p.json"}), ValueError);
  EXPECT_THROW(TrainStep(*model, StepConfig{.precision = "auto-layer", .compute = "fp8"}), ValueError);
  // A model without Linear or Conv2d layers has nothing to steer.
  auto relu = nn::sequential({std::make_shared<nn::ReLU>()});
  EXPECT_THROW(TrainStep(*relu, StepConfig{.precision = "auto-layer"}), ValueError);
}

// fp8 runs read the same policy file: "fp8" puts a Linear in fp8, another dtype keeps it out;
// a layer the model lacks, or a policy that leaves no fp8 layer, is refused naming the file.
TEST(LayerPolicy, PicksTheFp8LayersOfAnFp8Run) {
  const std::string path = temp_path("fp8-policy.json");
  const std::string head = R"({"format": "mixprec-layer-policy", "version": 1, "compute": "bf16", )";
  auto model = two_layers(1.0f);  // Linears "1" and "4": none in fp8 by default
  io::write_file_atomically(path, head + R"("layers": {"1": "fp8", "4": "bf16"}})");
  for (const char* precision : {"fp8", "fp8-delayed"}) {
    TrainStep step(*model, StepConfig{.precision = precision, .layer_policy = path});
    ASSERT_NE(step.fp8_layers(), nullptr);
    EXPECT_EQ(step.fp8_layers()->paths(), (std::vector<std::string>{"1"}));
    train(step, *model, 2);
  }
  const auto refused = [&](const std::string& layers, const std::string& needle) {
    io::write_file_atomically(path, head + layers + "}");
    try {
      TrainStep step(*model, StepConfig{.precision = "fp8", .layer_policy = path});
      ADD_FAILURE() << "accepted: " << layers;
    } catch (const ValueError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
    }
  };
  refused(R"("layers": {"9": "fp8"})", "names layer '9', which is not a Linear of Sequential (its Linears: 1, 4)");
  refused(R"("layers": {"1": "bf16"})", "leaves no Linear");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace mixprec::train
