#include <gtest/gtest.h>

#include "mixprec/autograd/node.h"
#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/residual.h"
#include "mixprec/ops/nn_functional.h"

using namespace mixprec;

namespace {

Shape input_shape(const models::ModelSpec& spec, std::int64_t n) {
  Shape s{n};
  s.insert(s.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  return s;
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
    auto model = models::make_model(spec.name, 1);
    const Tensor x = Tensor::randn(input_shape(spec, 4), 5);
    const Tensor logits = (*model)(x);
    ASSERT_EQ(logits.shape(), (Shape{4, spec.num_classes})) << spec.name;
    cross_entropy(logits, {0, 1, 2, 3}).backward();
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
    EXPECT_NE(std::string(e.what()).find("mlp, cnn, resnet, seed-mlp"), std::string::npos);
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
