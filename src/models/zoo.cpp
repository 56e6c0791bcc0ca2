#include "mixprec/models/zoo.h"

#include <mutex>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/gpt.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/nn/residual.h"
#include "mixprec/nn/resnet.h"

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

// Images in [0, 1] turned into raw 16-bit sensor counts (0 to 65535), as a camera or a
// microscope delivers them. A count of 65535 is already beyond fp16's largest value, 65504.
class RawSensorCounts : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return x * 65535.0f; }
  std::string type_name() const override { return "RawSensorCounts"; }
};

// The mlp on raw sensor counts, with a LayerNorm after its first layer to take the counts'
// scale out: it trains like the mlp in fp32 and bf16, but its first layer's inputs and
// activations (about 1e4 to 1e5) do not fit fp16, while the rest of the model does. The case
// the precision autopilot (--precision auto-layer) is for.
std::shared_ptr<nn::Module> sensor_mlp(std::uint64_t seed) {
  return std::make_shared<Stack>(
      "SensorMLP", sequential({make<RawSensorCounts>(), make<nn::Linear>(784, 256, true, seed),
                               make<nn::LayerNorm>(256), make<nn::ReLU>(),
                               make<nn::Linear>(256, 128, true, seed + 1), make<nn::ReLU>(),
                               make<nn::Linear>(128, 10, true, seed + 2)}));
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


std::shared_ptr<nn::Module> gpt(const ModelOptions& o, std::int64_t vocab) {
  nn::GptConfig c;
  c.vocab_size = vocab;
  c.context = o.context;
  c.d_model = o.width;
  c.n_heads = o.heads;
  c.n_layers = o.layers;
  c.dropout = o.dropout;
  c.seed = o.seed;
  c.checkpoint_activations = o.checkpoint_activations;
  return std::make_shared<nn::GPT>(c);
}

std::vector<ModelSpec> builtin_models() {
  auto classifier = [](std::string name, std::string description, std::vector<std::int64_t> shape,
                       bool synthetic, std::function<std::shared_ptr<nn::Module>(std::uint64_t)> make) {
    ModelSpec s;
    s.name = std::move(name);
    s.description = std::move(description);
    s.sample_shape = std::move(shape);
    s.synthetic_data = synthetic;
    if (make) s.factory = [make = std::move(make)](const ModelOptions& o) { return make(o.seed); };
    return s;
  };
  std::vector<ModelSpec> specs{
      classifier("mlp", "MLP 784-256-128-10 with ReLU (Fashion-MNIST; input and output widths follow --data)",
                 {784}, false, nullptr),
      classifier("cnn", "2x [conv3x3-BN-ReLU-maxpool] (32, 64 channels), FC 128, FC 10 (Fashion-MNIST)",
                 {1, 28, 28}, false, cnn),
      classifier("resnet", "ResNet: stem + 3 BasicBlocks (16, 32, 64 channels), global pool, FC 10 "
                           "(Fashion-MNIST)",
                 {1, 28, 28}, false, resnet),
      classifier("sensor-mlp",
                 "MLP 784-256(LayerNorm)-128-10 on raw 16-bit sensor counts (Fashion-MNIST x 65535): "
                 "its first layer exceeds fp16's range, the rest fits",
                 {784}, false, sensor_mlp),
      classifier("seed-mlp", "the seeds' MLP 1024-4096-4096-10 with ReLU (synthetic data)", {1024}, true,
                 [](std::uint64_t seed) { return make_seed_mlp(4096, seed); }),
  };
  // Only the widths at the ends follow the data; the hidden sizes are the model's.
  specs[0].sized_by_data = true;
  specs[0].defaults.inputs = 784;
  specs[0].defaults.outputs = 10;
  specs[0].factory = [](const ModelOptions& o) { return mlp(o.inputs, 256, 128, o.outputs, o.seed, "MLP"); };
  ModelSpec r50 = classifier(
      "resnet50",
      "ResNet-50 (torchvision's layout and names: bottleneck stages 3-4-6-3, 25.6M parameters), "
      "1000 classes, images 3 x --image-size x --image-size (default 224; synthetic data or --data images:DIR)",
      {3, 224, 224}, true, nullptr);
  r50.num_classes = 1000;
  r50.defaults.image_size = 224;
  r50.factory = [](const ModelOptions& o) -> std::shared_ptr<nn::Module> {
    return nn::resnet50(1000, o.seed);
  };
  specs.push_back(std::move(r50));
  ModelSpec g;
  g.name = "gpt-mini";
  g.description = "byte-level GPT: 4 pre-LN blocks, 4 heads, width 128, context 128, tied head (text)";
  g.task = TaskKind::language_model;
  g.num_classes = 256;
  g.defaults.context = 128;
  g.defaults.layers = 4;
  g.defaults.heads = 4;
  g.defaults.width = 128;
  g.sample_shape = {g.defaults.context};
  g.factory = [](const ModelOptions& o) { return gpt(o, 256); };
  specs.push_back(std::move(g));
  return specs;
}

struct Registry {
  std::mutex mutex;
  std::vector<ModelSpec> specs = builtin_models();
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const char* name(TaskKind task) {
  switch (task) {
    case TaskKind::classification: return "classification";
    case TaskKind::language_model: return "language-model";
    case TaskKind::regression: return "regression";
  }
  return "?";
}

void register_model(ModelSpec spec) {
  MIXPREC_CHECK(!spec.name.empty() && spec.factory, ValueError, "register_model",
                "a model needs a name and a factory");
  MIXPREC_CHECK(spec.num_classes >= 1, ValueError, "register_model",
                "model '" << spec.name << "' needs num_classes >= 1, got " << spec.num_classes);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  for (const ModelSpec& s : r.specs) {
    MIXPREC_CHECK(s.name != spec.name, ValueError, "register_model",
                  "a model named '" << spec.name << "' is already registered");
  }
  r.specs.push_back(std::move(spec));
}

std::vector<ModelSpec> model_specs() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return r.specs;
}

std::string model_names() {
  std::string names;
  for (const ModelSpec& s : model_specs()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

ModelSpec model_spec(std::string_view name) {
  for (ModelSpec& s : model_specs()) {
    if (s.name == name) return std::move(s);
  }
  detail::throw_error<ValueError>(
      "model", "unknown model '" + std::string(name) + "'; choose one of " + model_names());
}

MemoryFormat default_memory_format() {
  // A GPU: cuDNN's and PyTorch's fastest convolutions read NHWC. A CPU with native bf16:
  // oneDNN's nhwc JIT kernels need no reorders, and the CNN's step is as fast in f32 and faster
  // in bf16 (docs/training.md, "Memory format"). Elsewhere (AVX2, arm64) NCHW measured faster.
  if (!current_device().is_host()) return MemoryFormat::channels_last;
  return isa_allowed(Isa::avx512_bf16) ? MemoryFormat::channels_last : MemoryFormat::contiguous;
}

ModelOptions resolve_options(const ModelSpec& spec, ModelOptions o) {
  const ModelOptions& d = spec.defaults;
  if (o.context == 0) o.context = d.context;
  if (o.layers == 0) o.layers = d.layers;
  if (o.heads == 0) o.heads = d.heads;
  if (o.width == 0) o.width = d.width;
  constexpr const char* op = "model";
  if (spec.sized_by_data) {
    if (o.inputs == 0) o.inputs = d.inputs;
    if (o.outputs == 0) o.outputs = d.outputs;
    MIXPREC_CHECK(o.inputs >= 1 && o.inputs <= (1 << 24) && o.outputs >= 1 && o.outputs <= (1 << 20), ValueError,
                  op, spec.name << " needs 1..2^24 inputs and 1..2^20 outputs, got " << o.inputs << " and "
                                << o.outputs);
  } else {
    std::int64_t own = 1;
    for (const std::int64_t dim : spec.sample_shape) own *= dim;
    MIXPREC_CHECK((o.inputs == 0 || o.inputs == own) && (o.outputs == 0 || o.outputs == spec.num_classes),
                  ValueError, op,
                  spec.name << " takes " << own << " inputs and has " << spec.num_classes
                            << " outputs, but the data needs " << o.inputs << " and " << o.outputs
                            << "; --model mlp follows the data's shape");
  }
  if (spec.defaults.image_size > 0) {
    if (o.image_size == 0) o.image_size = spec.defaults.image_size;
    MIXPREC_CHECK(o.image_size >= 32 && o.image_size <= 4096, ValueError, op,
                  "--image-size must be in [32, 4096] for " << spec.name << ", got "
                                                             << o.image_size);
  } else {
    MIXPREC_CHECK(o.image_size == 0, ValueError, op,
                  spec.name << " takes inputs of one size, " << to_string(spec.sample_shape)
                            << "; --image-size is for models that take any (resnet50)");
  }
  const bool images = spec.task != TaskKind::language_model && spec.sample_shape.size() == 3;
  if (images) {
    if (o.memory_format.empty()) o.memory_format = name(default_memory_format());
    o.memory_format = name(parse_memory_format(o.memory_format));  // ValueError naming both
  } else {
    MIXPREC_CHECK(o.memory_format.empty(), ValueError, op,
                  "--memory-format applies to image models (cnn, resnet, resnet50), not to "
                      << spec.name);
  }
  if (spec.task != TaskKind::language_model) return o;
  auto check = [&](std::int64_t v, const char* flag, std::int64_t max) {
    MIXPREC_CHECK(v >= 1 && v <= max, ValueError, op,
                  flag << " must be in [1, " << max << "] for " << spec.name << ", got " << v);
  };
  check(o.context, "--context", 1 << 16);
  check(o.layers, "--layers", 256);
  check(o.heads, "--heads", 1024);
  check(o.width, "--width", 1 << 16);
  MIXPREC_CHECK(o.width % o.heads == 0, ValueError, op,
                "--heads " << o.heads << " does not divide --width " << o.width
                           << "; each head takes width / heads channels");
  MIXPREC_CHECK(o.dropout >= 0.0f && o.dropout < 1.0f, ValueError, op,
                "--dropout must be in [0, 1), got " << o.dropout);
  return o;
}

std::vector<std::int64_t> input_shape(const ModelSpec& spec, const ModelOptions& resolved) {
  if (spec.task == TaskKind::language_model) return {resolved.context};
  if (spec.sized_by_data) return {resolved.inputs};
  if (spec.defaults.image_size > 0) {
    return {spec.sample_shape[0], resolved.image_size, resolved.image_size};
  }
  return spec.sample_shape;
}

std::shared_ptr<nn::Module> build_model(const ModelSpec& spec, const ModelOptions& resolved) {
  std::shared_ptr<nn::Module> model = spec.factory(resolved);
  if (!resolved.memory_format.empty()) {
    model->set_input_memory_format(parse_memory_format(resolved.memory_format));
  }
  return model;
}

std::shared_ptr<nn::Module> make_model(std::string_view name, const ModelOptions& options) {
  const ModelSpec spec = model_spec(name);
  return build_model(spec, resolve_options(spec, options));
}

std::shared_ptr<nn::Module> make_model(std::string_view name, std::uint64_t seed) {
  ModelOptions o;
  o.seed = seed;
  return make_model(name, o);
}

std::shared_ptr<nn::Module> make_seed_mlp(std::int64_t width, std::uint64_t seed) {
  MIXPREC_CHECK(width >= 1 && width <= 16384, ValueError, "model",
                "seed-mlp width must be in [1, 16384], got " << width);
  return mlp(1024, width, width, 10, seed, "SeedMLP");
}

}  // namespace mixprec::models
