#include <gtest/gtest.h>

#include "mixprec/runtime/node.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/residual.h"
#include "mixprec/nn/resnet.h"
#include "mixprec/ops/nn_functional.h"

using namespace mixprec;

namespace {

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
    if (spec.task == models::TaskKind::language_model) o.context = 8;  // a short window
    if (spec.defaults.image_size > 0) o.image_size = 32;  // resnet50: the smallest images
    auto model = models::make_model(spec.name, o);
    const bool lm = spec.task == models::TaskKind::language_model;
    Shape shape{4};
    for (const std::int64_t d : models::input_shape(spec, models::resolve_options(spec, o))) {
      shape.push_back(d);
    }
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

// ResNet-50 as torchvision builds it: torchvision's published parameter count (ResNet50_Weights
// meta "num_params"), its state dict's entries (less its 53 num_batches_tracked counters) with
// their names and shapes, and images of any size from 32 pixels up.
TEST(ModelsResNet50, HasTorchvisionsParametersNamesAndShapes) {
  auto model = models::make_model("resnet50", 0);
  EXPECT_EQ(model->parameter_count(), 25557032);
  const auto state = model->state_dict();
  // 53 convolutions, 53 batch norms (weight, bias, running mean and variance) and fc's 2.
  EXPECT_EQ(state.size(), 53u + 53u * 4u + 2u);
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"conv1.weight", {64, 3, 7, 7}},
      {"bn1.running_var", {64}},
      {"layer1.0.conv1.weight", {64, 64, 1, 1}},
      {"layer1.0.conv2.weight", {64, 64, 3, 3}},
      {"layer1.0.conv3.weight", {256, 64, 1, 1}},
      {"layer1.0.downsample.0.weight", {256, 64, 1, 1}},
      {"layer1.0.downsample.1.running_mean", {256}},
      {"layer1.2.bn3.bias", {256}},
      {"layer2.0.conv1.weight", {128, 256, 1, 1}},
      {"layer2.0.conv2.weight", {128, 128, 3, 3}},
      {"layer2.0.downsample.0.weight", {512, 256, 1, 1}},
      {"layer2.3.conv3.weight", {512, 128, 1, 1}},
      {"layer3.5.bn2.weight", {256}},
      {"layer3.0.downsample.0.weight", {1024, 512, 1, 1}},
      {"layer4.0.downsample.0.weight", {2048, 1024, 1, 1}},
      {"layer4.2.conv2.weight", {512, 512, 3, 3}},
      {"layer4.2.bn3.running_var", {2048}},
      {"fc.weight", {1000, 2048}},
      {"fc.bias", {1000}},
  };
  for (const auto& [key, shape] : expected) {
    const auto it = state.find(key);
    ASSERT_NE(it, state.end()) << key;
    EXPECT_EQ(it->second.shape(), shape) << key;
  }
  // Only the first block of each stage downsamples.
  EXPECT_EQ(state.count("layer1.1.downsample.0.weight"), 0u);
  EXPECT_EQ(state.count("layer3.1.downsample.0.weight"), 0u);

  const models::ModelSpec spec = models::model_spec("resnet50");
  models::ModelOptions o;
  EXPECT_EQ(models::input_shape(spec, models::resolve_options(spec, o)),
            (std::vector<std::int64_t>{3, 224, 224}));
  o.image_size = 512;
  EXPECT_EQ(models::input_shape(spec, models::resolve_options(spec, o)),
            (std::vector<std::int64_t>{3, 512, 512}));
  o.image_size = 31;
  EXPECT_THROW(models::resolve_options(spec, o), ValueError);
  models::ModelOptions cnn;
  cnn.image_size = 64;
  EXPECT_THROW(models::resolve_options(models::model_spec("cnn"), cnn), ValueError);
  // The image sizes of the seeds' example and ImageNet's, and a non-square one, all map to
  // logits; below 32 pixels the last stage would be empty.
  const Tensor logits = (*model)(Tensor::randn({1, 3, 40, 56}, 3));
  EXPECT_EQ(logits.shape(), (Shape{1, 1000}));
  EXPECT_THROW((*model)(Tensor::randn({1, 3, 16, 16}, 3)), ShapeError);
}

TEST(ModelsBottleneck, DownsamplesOnlyWhenNeededAndStridesItsThreeByThree) {
  nn::Bottleneck same(32, 8, 1, 0), down(16, 8, 2, 0);
  EXPECT_EQ(same.children().size(), 6u);  // 32 = 4 x 8 channels in and out: identity
  EXPECT_EQ(down.children().size(), 7u);
  EXPECT_EQ(down.children().back().first, "downsample");
  const Tensor x = Tensor::randn({2, 32, 6, 6}, 1);
  EXPECT_EQ(same(x).shape(), (Shape{2, 32, 6, 6}));
  EXPECT_EQ(down(Tensor::randn({2, 16, 6, 6}, 2)).shape(), (Shape{2, 32, 3, 3}));
  for (float v : same(x).to_vector()) EXPECT_GE(v, 0.0f);  // a ReLU ends the block
  // torchvision v1.5: the stride is on conv2 (3x3), conv1 (1x1) keeps the resolution.
  const auto convs = down.named_parameters();
  EXPECT_EQ(convs[0].first, "conv1.weight");
  EXPECT_EQ(convs[0].second.shape(), (Shape{8, 16, 1, 1}));
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

// Image models without --memory-format take the layout their convolutions run fastest in:
// channels-last on a device and on CPUs with native bf16 (oneDNN's nhwc JIT kernels), NCHW on
// the others. A given format is kept, and models without images take none.
TEST(ModelsZoo, DefaultMemoryFormatFollowsTheDeviceAndNativeBf16) {
  const models::ModelSpec cnn = models::model_spec("cnn");
  const std::string native = isa_allowed(Isa::avx512_bf16) ? "channels-last" : "contiguous";
  EXPECT_EQ(models::resolve_options(cnn, {}).memory_format, native);
  const Isa before = max_isa();
  set_max_isa(Isa::avx2);  // no native bf16 (on arm64 it caps nothing, and there is none)
  EXPECT_EQ(models::resolve_options(cnn, {}).memory_format, "contiguous");
  set_max_isa(before);
  models::ModelOptions given;
  given.memory_format = "contiguous";
  EXPECT_EQ(models::resolve_options(cnn, given).memory_format, "contiguous");
  EXPECT_TRUE(models::resolve_options(models::model_spec("gpt-mini"), {}).memory_format.empty());
  const std::string host = kernel_backend();
  set_device("devsim");
  EXPECT_EQ(models::resolve_options(cnn, {}).memory_format, "channels-last");
  set_device("cpu");
  EXPECT_EQ(kernel_backend(), host);
}
