#include "mixprec/models/zoo.h"

#include "mixprec/core/error.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/nn/residual.h"

namespace mixprec::models {
namespace {

// A classifier with two named stages, so module paths read "features.3.weight" and
// "classifier.1.bias" in checkpoints and diagnostics.
class TwoStage : public nn::Module {
 public:
  TwoStage(std::string type, std::shared_ptr<nn::Module> features,
           std::shared_ptr<nn::Module> classifier)
      : type_(std::move(type)) {
    features_ = register_module("features", std::move(features));
    classifier_ = register_module("classifier", std::move(classifier));
  }
  Tensor forward(const Tensor& x) override { return (*classifier_)((*features_)(x)); }
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
  std::shared_ptr<nn::Module> features_, classifier_;
};

// A model that is a single Sequential named "layers".
class Stack : public nn::Module {
 public:
  Stack(std::string type, std::shared_ptr<nn::Module> layers) : type_(std::move(type)) {
    layers_ = register_module("layers", std::move(layers));
  }
  Tensor forward(const Tensor& x) override { return (*layers_)(x); }
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
  std::shared_ptr<nn::Module> layers_;
};

using nn::sequential;
template <class M, class... Args>
std::shared_ptr<nn::Module> make(Args&&... args) {
  return std::make_shared<M>(std::forward<Args>(args)...);
}

std::shared_ptr<nn::Module> mlp(std::int64_t in, std::int64_t hidden1, std::int64_t hidden2,
                                std::int64_t out, std::uint64_t seed, const char* type) {
  return std::make_shared<Stack>(
      type, sequential({make<nn::Linear>(in, hidden1, true, seed), make<nn::ReLU>(),
                        make<nn::Linear>(hidden1, hidden2, true, seed + 1), make<nn::ReLU>(),
                        make<nn::Linear>(hidden2, out, true, seed + 2)}));
}

std::shared_ptr<nn::Module> cnn(std::uint64_t seed) {
  auto features = sequential({make<nn::Conv2d>(1, 32, 3, 1, 1, false, seed),
                              make<nn::BatchNorm2d>(32), make<nn::ReLU>(), make<nn::MaxPool2d>(2),
                              make<nn::Conv2d>(32, 64, 3, 1, 1, false, seed + 1),
                              make<nn::BatchNorm2d>(64), make<nn::ReLU>(), make<nn::MaxPool2d>(2)});
  auto classifier = sequential({make<nn::Flatten>(), make<nn::Linear>(64 * 7 * 7, 128, true, seed + 2),
                                make<nn::ReLU>(), make<nn::Linear>(128, 10, true, seed + 3)});
  return std::make_shared<TwoStage>("CNN", features, classifier);
}

std::shared_ptr<nn::Module> resnet(std::uint64_t seed) {
  auto features = sequential({make<nn::Conv2d>(1, 16, 3, 1, 1, false, seed),
                              make<nn::BatchNorm2d>(16), make<nn::ReLU>(),
                              make<nn::BasicBlock>(16, 16, 1, seed + 10),
                              make<nn::BasicBlock>(16, 32, 2, seed + 20),
                              make<nn::BasicBlock>(32, 64, 2, seed + 30),
                              make<nn::GlobalAvgPool2d>()});
  auto classifier = sequential({make<nn::Linear>(64, 10, true, seed + 40)});
  return std::make_shared<TwoStage>("ResNet", features, classifier);
}

}  // namespace

const std::vector<ModelSpec>& model_specs() {
  static const std::vector<ModelSpec> specs{
      {"mlp", "MLP 784-256-128-10 with ReLU (Fashion-MNIST)", {784}, 10, false},
      {"cnn", "2x [conv3x3-BN-ReLU-maxpool] (32, 64 channels), FC 128, FC 10 (Fashion-MNIST)",
       {1, 28, 28}, 10, false},
      {"resnet", "ResNet: stem + 3 BasicBlocks (16, 32, 64 channels), global pool, FC 10 "
                 "(Fashion-MNIST)", {1, 28, 28}, 10, false},
      {"seed-mlp", "the seeds' MLP 1024-4096-4096-10 with ReLU (synthetic data)", {1024}, 10, true},
  };
  return specs;
}

std::string model_names() {
  std::string names;
  for (const ModelSpec& s : model_specs()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

const ModelSpec& model_spec(std::string_view name) {
  for (const ModelSpec& s : model_specs()) {
    if (s.name == name) return s;
  }
  detail::throw_error<ValueError>(
      "model", "unknown model '" + std::string(name) + "'; choose one of " + model_names());
}

std::shared_ptr<nn::Module> make_model(std::string_view name, std::uint64_t seed) {
  const ModelSpec& spec = model_spec(name);
  if (spec.name == "mlp") return mlp(784, 256, 128, 10, seed, "MLP");
  if (spec.name == "cnn") return cnn(seed);
  if (spec.name == "resnet") return resnet(seed);
  return make_seed_mlp(4096, seed);
}

std::shared_ptr<nn::Module> make_seed_mlp(std::int64_t width, std::uint64_t seed) {
  MIXPREC_CHECK(width >= 1 && width <= 16384, ValueError, "model",
                "seed-mlp width must be in [1, 16384], got " << width);
  return mlp(1024, width, width, 10, seed, "SeedMLP");
}

}  // namespace mixprec::models
