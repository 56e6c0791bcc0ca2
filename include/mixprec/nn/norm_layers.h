#pragma once
/// Normalisation layers: BatchNorm2d, BatchNorm1d, LayerNorm. Parameters and running statistics
/// are f32; the layers accept f32/bf16/f16 inputs and return the input's dtype (LayerNorm under
/// amp::Autocast returns f32, its fp32 policy).
#include <cstdint>

#include "mixprec/nn/module.h"

namespace mixprec::nn {

/// Shared implementation of BatchNorm1d/2d: parameters "weight" (ones) and "bias" (zeros),
/// buffers "running_mean" (zeros) and "running_var" (ones), all f32 [num_features]. Training
/// mode normalises with batch statistics and updates the running ones (PyTorch's rule, see
/// mixprec::batch_norm); eval mode uses the running statistics.
class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  std::int64_t num_features() const { return features_; }
  float eps() const { return eps_; }
  float momentum() const { return momentum_; }

 protected:
  BatchNormBase(const char* type, std::int64_t num_features, float eps, float momentum);
  /// Throws ShapeError unless x has a rank this layer accepts.
  virtual void check_input(const Tensor& x) const = 0;

 private:
  std::int64_t features_;
  float eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_;  // handles sharing the registered tensors
};

/// Batch norm over channels of x [N, C, H, W] (also [N, C]), C = num_features.
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(std::int64_t num_features, float eps = 1e-5f, float momentum = 0.1f)
      : BatchNormBase("BatchNorm2d", num_features, eps, momentum) {}
  std::string type_name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Tensor& x) const override;
};

/// Batch norm over features of x [N, C] (also [N, C, L]), C = num_features.
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(std::int64_t num_features, float eps = 1e-5f, float momentum = 0.1f)
      : BatchNormBase("BatchNorm1d", num_features, eps, momentum) {}
  std::string type_name() const override { return "BatchNorm1d"; }

 protected:
  void check_input(const Tensor& x) const override;
};

/// Layer norm over the last dimension of x [..., normalized_size]; parameters "weight" (ones)
/// and "bias" (zeros), f32 [normalized_size].
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::int64_t normalized_size, float eps = 1e-5f);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  std::int64_t size_;
  float eps_;
  Tensor weight_, bias_;
};

}  // namespace mixprec::nn
