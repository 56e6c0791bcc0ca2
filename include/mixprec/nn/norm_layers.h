#pragma once
/// Normalisation layers: BatchNorm2d, BatchNorm1d, LayerNorm. Parameters and running statistics
/// are f32; the layers accept f32/bf16/f16 inputs and return the input's dtype (LayerNorm under
/// runtime::Autocast returns f32, its fp32 policy).
#include <cstdint>

#include "mixprec/nn/module.h"
#include "mixprec/ops/normalization.h"

namespace mixprec::runtime {
class Communicator;
}

namespace mixprec::nn {

/// Shared implementation of BatchNorm1d/2d: parameters "weight" (ones) and "bias" (zeros),
/// buffers "running_mean" (zeros) and "running_var" (ones), all f32 [num_features]. Training
/// mode normalises with batch statistics and updates the running ones (PyTorch's rule, see
/// mixprec::batch_norm); eval mode uses the running statistics. With set_sync, training mode
/// uses the statistics of every rank's batch instead (ops::sync_batch_norm).
class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  /// relu(this(x) + residual), or relu(this(x)) with residual undefined: one fused op
  /// (batch_norm_relu, the same bits) when fuses_relu(), else this module's call, the add and
  /// relu apart. Convnets end their conv-BN-ReLU (Sequential does it) and ResNet blocks with it.
  Tensor relu_forward(const Tensor& x, const Tensor& residual = Tensor());
  /// max_pool2d(relu(this(x)), kernel) as one op (batch_norm_relu_max_pool2d) when
  /// fuses_relu(), else this module's call, relu and max_pool2d apart. Windows must tile x.
  Tensor relu_pool_forward(const Tensor& x, std::int64_t kernel);
  /// Whether relu_forward fuses now: this module runs plainly (Module::runs_plainly) and its
  /// statistics are this process's (not synchronised, or in eval mode).
  bool fuses_relu() const;
  /// Synchronised statistics: in training mode, normalise with the mean and variance of the
  /// global batch of comm's ranks (ops::sync_batch_norm; forward and backward become
  /// collective), so that every rank must run this layer in step. nullptr (the default): this
  /// process's batch only. comm must outlive the layer's forward and backward passes. A
  /// communicator of one rank gives exactly the unsynchronised result; eval mode is unaffected.
  void set_sync(const runtime::Communicator* comm) { sync_ = comm; }
  /// The communicator set by set_sync, or nullptr.
  const runtime::Communicator* sync() const { return sync_; }
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
  const runtime::Communicator* sync_ = nullptr;
};

/// Calls set_sync(comm) on every BatchNorm layer (BatchNorm1d/2d) of the module tree under root,
/// root included (PyTorch's SyncBatchNorm.convert_sync_batchnorm, without replacing modules);
/// nullptr turns synchronisation off again. Returns the number of layers set.
std::int64_t set_sync_batchnorm(Module& root, const runtime::Communicator* comm);

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
  /// The residual step x + delta followed by this norm: one fused pass (add_layer_norm) when
  /// this module runs plainly (runs_plainly()), else x + delta and then operator()(sum), so
  /// observers, anomaly reports and compute-dtype overrides see the call as ever. The results
  /// are the same bits either way.
  ResidualNorm add_then_forward(const Tensor& x, const Tensor& delta);
  std::string type_name() const override { return "LayerNorm"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  std::int64_t size_;
  float eps_;
  Tensor weight_, bias_;
};

}  // namespace mixprec::nn
