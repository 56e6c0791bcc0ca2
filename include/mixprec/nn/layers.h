#pragma once
/// Basic layers: Linear, ReLU, GELU, Flatten, Dropout, Sequential.
#include <cstdint>
#include <initializer_list>

#include "mixprec/nn/module.h"
#include "mixprec/ops/elementwise.h"

namespace mixprec::nn {

/// y = x W^T + b. x [..., in_features] -> [..., out_features]. Weights and bias start as
/// U(-1/sqrt(in), 1/sqrt(in)) from seed (PyTorch's default init), stored in dtype.
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true,
         std::uint64_t seed = 0, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) override;
  /// Output features [first, first + count) alone: x [..., in] @ weight[first:first+count]^T
  /// + bias[first:first+count] -> [..., count], in this layer's compute dtype as operator()
  /// runs it (forward observers do not see it). For a packed projection applied to one of its
  /// inputs (MultiHeadAttention's qkv_proj in cross-attention); gradients reach those rows of
  /// weight and bias. ValueError for a range outside [0, out_features), or inside an fp8 scope
  /// that picked this layer (fp8 scales the whole weight as one tensor).
  Tensor forward_rows(const Tensor& x, std::int64_t first, std::int64_t count);
  std::string type_name() const override { return "Linear"; }
  const Tensor& weight() const { return weight_; }
  /// Undefined when constructed without bias.
  const Tensor& bias() const { return bias_; }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

 private:
  std::int64_t in_, out_;
  Tensor weight_;  // handles sharing the registered parameters
  Tensor bias_;
};

/// max(x, 0), any shape and dtype.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

/// GELU, any shape and dtype: exact (erf) by default, or the tanh approximation (GPT-2).
class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::none)
      : approximate_(approximate) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
  GeluApproximation approximate() const { return approximate_; }

 private:
  GeluApproximation approximate_;
};

/// [N, d1, d2, ...] -> [N, d1*d2*...].
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
};

/// Inverted dropout with probability p in training mode; identity in eval mode. Each call in
/// training draws a fresh mask from (seed, call counter), so runs are reproducible.
class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f, std::uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  /// Number of masks drawn so far (part of the training state for exact resumption).
  std::uint64_t calls() const { return calls_; }
  void set_calls(std::uint64_t calls) { calls_ = calls; }

 protected:
  /// The call counter: Module::random_state() saves it so a forward can be replayed.
  std::vector<std::uint64_t> own_random_state() const override { return {calls_}; }
  void set_own_random_state(std::span<const std::uint64_t> state) override { calls_ = state[0]; }

 private:
  float p_;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
};

/// Applies its children in order; they are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  /// Appends a module (named by its position).
  Sequential& append(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  std::size_t size() const { return children().size(); }
};

/// A shared Sequential of the given modules: nn::sequential({linear, relu, ...}).
std::shared_ptr<Sequential> sequential(std::initializer_list<std::shared_ptr<Module>> modules);

}  // namespace mixprec::nn
