#include <gtest/gtest.h>

#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/residual.h"
#include "mixprec/ops/nn_functional.h"

using namespace mixprec;

namespace {

Shape input_shape(const models::ModelSpec& spec, std::int64_t n) {
  Shape s{n};
  s.insert(s.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  return s;
}

// A batch of inputs the model takes: features, or token ids (whole numbers below the
// vocabulary) for a language model.
Tensor sample_inputs(const models::ModelSpec& spec, const Shape& shape) {
  if (spec.task != models::TaskKind::language_model) return Tensor::randn(shape, 5);
  std::vector<float> ids(static_cast<std::size_t>(numel(shape)));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>((i * 37 + 11) % 256);
  return Tensor::from_vector(ids, shape);
}

}  // namespace

TEST(ModelsZoo, ParameterCountsMatchTheArchitectures) {
  EXPECT_EQ(models::make_model("mlp", 0)->parameter_count(),
            784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  // conv 1->32 (no bias), BN 32, conv 32->64, BN 64, FC 3136->128, FC 128->10
  EXPECT_EQ(models::make_model("cnn", 0)->parameter_count(),
            32 * 9 + 64 + 64 * 32 * 9 + 128 + 3136 * 128 + 128 + 128 * 10 + 10);
  EXPECT_EQ(models::make_model("seed-mlp", 0)->parameter_count(),
            1024 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10);
  EXPECT_GT(models::make_model("resnet", 0)->parameter_count(), 50000);
}

TEST(ModelsZoo, EveryModelMapsABatchToLogitsAndGetsEveryGradient) {
  for (const models::ModelSpec& spec : models::model_specs()) {
    if (spec.name == "seed-mlp") continue;  // 21M parameters: covered by the count above
    models::ModelOptions o;
    o.seed = 1;
    o.context = 8;  // transformers: a short window keeps the test small
    auto model = models::make_model(spec.name, o);
    const bool lm = spec.task == models::TaskKind::language_model;
    const Shape shape = lm ? Shape{4, 8} : input_shape(spec, 4);
    const Tensor logits = (*model)(sample_inputs(spec, shape));
    const std::int64_t rows = lm ? 4 * 8 : 4;
    ASSERT_EQ(logits.numel(), rows * spec.num_classes) << spec.name;
    std::vector<std::int64_t> targets(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) targets[static_cast<std::size_t>(i)] = i % spec.num_classes;
    cross_entropy(logits.reshape({rows, spec.num_classes}), targets).backward();
    for (const auto& [path, p] : model->named_parameters()) {
      EXPECT_TRUE(p.grad().defined()) << spec.name << " " << path;
    }
  }
}

TEST(ModelsZoo, SameSeedSameWeightsOtherSeedOtherWeights) {
  const auto a = models::make_model("cnn", 9)->named_parameters();
  const auto b = models::make_model("cnn", 9)->named_parameters();
  const auto c = models::make_model("cnn", 10)->named_parameters();
  EXPECT_EQ(a[0].second.to_vector(), b[0].second.to_vector());
  EXPECT_NE(a[0].second.to_vector(), c[0].second.to_vector());
  EXPECT_EQ(a[0].first, "features.0.weight");
}

TEST(ModelsZoo, UnknownModelListsTheKnownOnes) {
  try {
    models::make_model("vgg", 0);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("mlp, cnn, resnet, sensor-mlp, seed-mlp"), std::string::npos);
  }
}

TEST(ModelsBasicBlock, DownsamplesWithAShortcutOnlyWhenNeeded) {
  nn::BasicBlock same(8, 8, 1, 0), down(8, 16, 2, 0);
  EXPECT_EQ(same.children().size(), 4u);
  EXPECT_EQ(down.children().size(), 5u);
  EXPECT_EQ(down.children().back().first, "shortcut");
  const Tensor x = Tensor::randn({2, 8, 6, 6}, 1);
  EXPECT_EQ(same(x).shape(), (Shape{2, 8, 6, 6}));
  EXPECT_EQ(down(x).shape(), (Shape{2, 16, 3, 3}));
  // The output is a ReLU: never negative.
  for (float v : down(x).to_vector()) EXPECT_GE(v, 0.0f);
}

TEST(ModelsZoo, UsersRegisterModelsThroughTheSameApi) {
  models::ModelSpec spec;
  spec.name = "test-zoo-tiny";
  spec.description = "Linear 4-3";
  spec.sample_shape = {4};
  spec.num_classes = 3;
  spec.factory = [](const models::ModelOptions& o) {
    return std::static_pointer_cast<nn::Module>(std::make_shared<nn::Linear>(4, 3, true, o.seed));
  };
  models::register_model(spec);
  EXPECT_NE(models::model_names().find("test-zoo-tiny"), std::string::npos);
  EXPECT_EQ(models::make_model("test-zoo-tiny", 2)->parameter_count(), 15);
  EXPECT_THROW(models::register_model(spec), ValueError);  // the name is taken
  spec.name = "test-zoo-nofactory";
  spec.factory = nullptr;
  EXPECT_THROW(models::register_model(spec), ValueError);
}

TEST(ModelsZoo, TransformerSizesResolveFromDefaultsAndAreChecked) {
  const models::ModelSpec gpt = models::model_spec("gpt-mini");
  models::ModelOptions o;
  o.width = 64;
  const models::ModelOptions r = models::resolve_options(gpt, o);
  EXPECT_EQ(r.width, 64);
  EXPECT_EQ(r.context, gpt.defaults.context);
  EXPECT_EQ(models::input_shape(gpt, r), (std::vector<std::int64_t>{r.context}));
  o.heads = 5;
  try {
    models::resolve_options(gpt, o);
    ADD_FAILURE() << "5 heads accepted for width 64";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--heads 5 does not divide --width 64"), std::string::npos);
  }
  o.heads = 4;
  o.dropout = 1.5f;
  EXPECT_THROW(models::resolve_options(gpt, o), ValueError);
}
