#pragma once
/// The built-in models, by name: what `mixprec train --model NAME` builds.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/nn/module.h"

namespace mixprec::models {

/// What a model expects and where its data comes from.
struct ModelSpec {
  std::string name;         ///< "mlp", "cnn", "resnet", "seed-mlp"
  std::string description;  ///< one line for --help and logs
  std::vector<std::int64_t> sample_shape;  ///< one input sample, e.g. {1, 28, 28} or {784}
  std::int64_t num_classes = 10;
  bool synthetic_data = false;  ///< true: trained on data::make_synthetic, not Fashion-MNIST
};

/// Every built-in model, in the order --help lists them.
const std::vector<ModelSpec>& model_specs();
/// The spec of a model; ValueError listing the known names otherwise.
const ModelSpec& model_spec(std::string_view name);
/// "mlp, cnn, resnet, seed-mlp".
std::string model_names();

/// A freshly initialised f32 model; the same seed gives the same weights.
///  - mlp: Linear 784-256, ReLU, Linear 256-128, ReLU, Linear 128-10 (paths "layers.0" ...).
///  - cnn: features = two blocks of conv3x3(pad 1)-BatchNorm-ReLU-maxpool2 (1->32->64 channels),
///    classifier = Flatten, Linear 3136-128, ReLU, Linear 128-10.
///  - resnet: stem conv3x3(16)-BN-ReLU, three BasicBlocks (16, 32 stride 2, 64 stride 2), global
///    average pool, Linear 64-10.
///  - seed-mlp: the seeds' Linear 1024-4096, ReLU, Linear 4096-4096, ReLU, Linear 4096-10.
std::shared_ptr<nn::Module> make_model(std::string_view name, std::uint64_t seed);

/// The seed MLP with hidden width `width` instead of 4096: Linear 1024-width, ReLU, Linear
/// width-width, ReLU, Linear width-10 (what `mixprec bench --width` scales). ValueError unless
/// width is in [1, 16384].
std::shared_ptr<nn::Module> make_seed_mlp(std::int64_t width, std::uint64_t seed);

}  // namespace mixprec::models
