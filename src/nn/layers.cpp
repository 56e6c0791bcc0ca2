#include "mixprec/nn/layers.h"

#include <cmath>

#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/fp8_linear.h"
#include "mixprec/ops/nn_functional.h"

namespace mixprec::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool bias, std::uint64_t seed,
               DType dtype)
    : in_(in_features), out_(out_features) {
  MIXPREC_CHECK(in_features > 0 && out_features > 0, ValueError, "Linear",
                "features must be positive, got in=" << in_features << " out=" << out_features);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  // Distinct streams for weight and bias so changing one never shifts the other.
  weight_ = register_parameter("weight", Tensor::uniform({out_, in_}, seed * 2 + 1, -bound, bound, dtype));
  if (bias) bias_ = register_parameter("bias", Tensor::uniform({out_}, seed * 2 + 2, -bound, bound, dtype));
}

Tensor Linear::forward(const Tensor& x) {
  // Inside an fp8 recipe's scope, the layers its policy picked run the fp8 GEMMs.
  if (Fp8LinearState* fp8 = active_fp8_state(*this)) return fp8_linear(x, weight_, bias_, *fp8);
  return linear(x, weight_, bias_);
}

Tensor Linear::forward_rows(const Tensor& x, std::int64_t first, std::int64_t count) {
  MIXPREC_CHECK(first >= 0 && count >= 1 && first + count <= out_, ValueError, "Linear",
                "forward_rows: rows [" << first << ", " << first + count
                                       << ") are not within the layer's " << out_ << " outputs");
  MIXPREC_CHECK(active_fp8_state(*this) == nullptr, ValueError, "Linear",
                "'" << path() << "' runs in fp8, whose one scale covers its whole weight, so its "
                    << "rows cannot run apart (cross-attention, query unlike key and value): pin "
                    << "it out of fp8 with a layer policy ({\"" << path() << "\": \"bf16\"})");
  return run_in_compute_dtype(x, [&](const Tensor& in) {
    return linear(in, weight_.slice(0, first, first + count),
                  bias_.defined() ? bias_.slice(0, first, first + count) : Tensor());
  });
}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }

Tensor Flatten::forward(const Tensor& x) {
  MIXPREC_CHECK(x.dim() >= 1, ShapeError, "Flatten", "needs at least a batch dimension");
  return x.reshape({x.size(0), -1});
}

Dropout::Dropout(float p, std::uint64_t seed) : p_(p), seed_(seed) {
  MIXPREC_CHECK(p >= 0.0f && p < 1.0f, ValueError, "Dropout", "p must be in [0, 1), got " << p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0f) return x;
  // A new stream per call: mix the call counter into the seed (splitmix64 finaliser).
  std::uint64_t z = seed_ + 0x9E3779B97F4A7C15ull * (++calls_);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return dropout(x, p_, true, z ^ (z >> 31));
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) append(m);
}

std::shared_ptr<Sequential> sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  return std::make_shared<Sequential>(modules);
}

Sequential& Sequential::append(std::shared_ptr<Module> module) {
  MIXPREC_CHECK(module != nullptr, ValueError, "Sequential", "cannot append a null module");
  register_module(std::to_string(children().size()), std::move(module));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  const auto& modules = children();
  for (std::size_t i = 0; i < modules.size(); ++i) {
    Module& module = *modules[i].second;
    // Batch norm, ReLU and a max pool whose windows tile channels-last activations run as one
    // op: the pooled output is the same bits, the full-size activation, its argmax and the
    // ReLU's mask are never stored, and the backward recomputes the windows from x (one-pass
    // rows on the CPU; in NCHW it would recompute through the unfused kernels, so it is left).
    if (auto* norm = dynamic_cast<BatchNormBase*>(&module);
        norm != nullptr && i + 2 < modules.size() && norm->fuses_relu() && h.dim() == 4 &&
        h.memory_format() == MemoryFormat::channels_last &&
        dynamic_cast<const ReLU*>(modules[i + 1].second.get()) != nullptr &&
        modules[i + 1].second->runs_plainly()) {
      const auto* pool = dynamic_cast<const MaxPool2d*>(modules[i + 2].second.get());
      const std::int64_t k = pool != nullptr && pool->runs_plainly() ? pool->tiling_kernel() : 0;
      if (k > 0 && h.size(2) % k == 0 && h.size(3) % k == 0) {
        h = norm->relu_pool_forward(h, k);
        i += 2;
        continue;
      }
    }
    // A batch norm followed by a ReLU runs as one op (the same bits, one pass over the
    // activations each way instead of two) when neither call has anything to hide it from.
    if (auto* norm = dynamic_cast<BatchNormBase*>(&module);
        norm != nullptr && i + 1 < modules.size() && norm->fuses_relu() &&
        dynamic_cast<const ReLU*>(modules[i + 1].second.get()) != nullptr &&
        modules[i + 1].second->runs_plainly()) {
      h = norm->relu_forward(h);
      ++i;
      continue;
    }
    h = module(h);
  }
  return h;
}

}  // namespace mixprec::nn
