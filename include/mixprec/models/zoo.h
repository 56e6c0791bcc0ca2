#pragma once
/// The model registry: what `mixprec train --model NAME` builds. The built-in models are
/// registered instances of the same API a user's model can use (register_model), so the
/// Trainer, `mixprec bench` and the checkpoint code treat them all alike.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/nn/module.h"

namespace mixprec::models {

/// What a model is trained for; it picks the loss, the metrics and the kind of data.
enum class TaskKind {
  classification,  ///< one class per sample: cross-entropy, accuracy, macro-F1
  language_model,  ///< next-token prediction on token ids [B, T]: loss, perplexity, bits/byte
  regression,      ///< one real value per sample (output [B, 1]): mean squared error, R²
};
const char* name(TaskKind task);

/// Sizes of the models that have them (transformers; the input and output widths of a model
/// sized by its data) and the seed of every model. 0 means "the model's default"
/// (ModelSpec::defaults); fixed-shape classifiers ignore all but seed.
struct ModelOptions {
  std::uint64_t seed = 0;
  std::int64_t context = 0;  ///< longest sequence (--context)
  std::int64_t layers = 0;   ///< transformer blocks (--layers)
  std::int64_t heads = 0;    ///< attention heads; must divide width (--heads)
  std::int64_t width = 0;    ///< d_model (--width)
  float dropout = 0.0f;      ///< on embeddings, attention probabilities and residual branches
  bool checkpoint_activations = false;  ///< recompute each block in backward (nn/checkpoint.h)
  /// Height and width of the square input images of a model that takes any size (resnet50:
  /// --image-size, default 224); 0 = the default. A fixed-size model refuses any other value.
  std::int64_t image_size = 0;
  /// Features per sample and outputs (classes, or 1 for regression) of a model whose spec is
  /// sized_by_data (the mlp: a CSV table's columns or an IDX set's pixels and classes).
  std::int64_t inputs = 0;
  std::int64_t outputs = 0;
  /// Image models (a sample shape [C, H, W]): the layout their input is converted to, once, at
  /// the model's input (--memory-format): "contiguous" (NCHW), "channels-last" (NHWC), or ""
  /// for the default, channels-last on a device (a GPU, or devsim) and contiguous on the host
  /// (docs/training.md, "Memory format", has the measurements behind it). Other models take
  /// only "".
  std::string memory_format;
};

/// What a model expects, where its data comes from, and how to build it.
struct ModelSpec {
  std::string name;         ///< "mlp", "cnn", "resnet", "seed-mlp", "gpt-mini", ...
  std::string description;  ///< one line for --help and logs
  /// One input sample, e.g. {1, 28, 28} or {784}; a language model's is {context} (from the
  /// resolved options, see input_shape).
  std::vector<std::int64_t> sample_shape;
  std::int64_t num_classes = 10;  ///< classes, or a language model's vocabulary size
  bool synthetic_data = false;    ///< true: trained on data::make_synthetic, not Fashion-MNIST
  TaskKind task = TaskKind::classification;
  /// The factory honours ModelOptions::inputs/outputs (hidden sizes stay), so the model can
  /// take any table or image size; defaults are sample_shape's elements and num_classes.
  bool sized_by_data = false;
  ModelOptions defaults;          ///< what 0 in ModelOptions stands for
  /// Builds a freshly initialised f32 model from resolved options (no zero sizes); the same
  /// options give the same weights.
  std::function<std::shared_ptr<nn::Module>(const ModelOptions&)> factory;
};

/// Adds a model to the registry, after the built-ins. ValueError if the name is empty or taken
/// or the factory is missing. Thread-safe.
void register_model(ModelSpec spec);

/// Every registered model, built-ins first, in the order --help lists them.
std::vector<ModelSpec> model_specs();
/// The spec of a model; ValueError listing the known names otherwise.
ModelSpec model_spec(std::string_view name);
/// "mlp, cnn, resnet, seed-mlp, gpt-mini".
std::string model_names();

/// The activation layout image models take when --memory-format is not given: channels-last on
/// a GPU and on CPUs whose executed ISA has native bf16 (avx512_bf16), contiguous elsewhere.
MemoryFormat default_memory_format();
/// options with every 0 size replaced by the spec's default, validated: ValueError naming the
/// flag (--context, --layers, --heads, --width, --dropout) for a size < 1, heads that do not
/// divide width, or dropout outside [0, 1); ValueError if inputs/outputs differ from a fixed
/// model's own (only a sized_by_data model follows its data).
ModelOptions resolve_options(const ModelSpec& spec, ModelOptions options);
/// spec's model built from options resolved by resolve_options, its input memory format set.
std::shared_ptr<nn::Module> build_model(const ModelSpec& spec, const ModelOptions& resolved);
/// The shape of one input sample under resolved options ({context} for a language model,
/// {inputs} for a model sized by its data, {channels, size, size} for an image model that takes
/// any size).
std::vector<std::int64_t> input_shape(const ModelSpec& spec, const ModelOptions& resolved);

/// A freshly initialised f32 model from (unresolved) options.
std::shared_ptr<nn::Module> make_model(std::string_view name, const ModelOptions& options);
/// A freshly initialised f32 model with default sizes; the same seed gives the same weights.
///  - mlp: Linear 784-256, ReLU, Linear 256-128, ReLU, Linear 128-10 (paths "layers.0" ...);
///    sized by its data: Linear inputs-256 ... Linear 128-outputs.
///  - cnn: features = two blocks of conv3x3(pad 1)-BatchNorm-ReLU-maxpool2 (1->32->64 channels),
///    classifier = Flatten, Linear 3136-128, ReLU, Linear 128-10.
///  - resnet: stem conv3x3(16)-BN-ReLU, three BasicBlocks (16, 32 stride 2, 64 stride 2), global
///    average pool, Linear 64-10.
///  - seed-mlp: the seeds' Linear 1024-4096, ReLU, Linear 4096-4096, ReLU, Linear 4096-10.
///  - gpt-mini: a byte-level GPT (nn/gpt.h), vocabulary 256, context 128, 4 layers, 4 heads,
///    width 128, trained on text (default: Debian's fortunes).
std::shared_ptr<nn::Module> make_model(std::string_view name, std::uint64_t seed);

/// The seed MLP with hidden width `width` instead of 4096: Linear 1024-width, ReLU, Linear
/// width-width, ReLU, Linear width-10 (what `mixprec bench --width` scales). ValueError unless
/// width is in [1, 16384].
std::shared_ptr<nn::Module> make_seed_mlp(std::int64_t width, std::uint64_t seed);

}  // namespace mixprec::models
