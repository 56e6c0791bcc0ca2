#include "mixprec/nn/norm_layers.h"

#include "mixprec/ops/conv.h"
#include "mixprec/ops/sync_batchnorm.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/normalization.h"

namespace mixprec::nn {

BatchNormBase::BatchNormBase(const char* type, std::int64_t num_features, float eps,
                             float momentum)
    : features_(num_features), eps_(eps), momentum_(momentum) {
  MIXPREC_CHECK(num_features > 0, ValueError, type,
                "num_features must be positive, got " << num_features);
  MIXPREC_CHECK(eps >= 0.0f, ValueError, type, "eps must be >= 0, got " << eps);
  MIXPREC_CHECK(momentum >= 0.0f && momentum <= 1.0f, ValueError, type,
                "momentum must be in [0, 1], got " << momentum);
  weight_ = register_parameter("weight", Tensor::ones({num_features}));
  bias_ = register_parameter("bias", Tensor::zeros({num_features}));
  // Buffers are filed as parameters too: they live as long as the model, like its weights.
  running_mean_ = register_buffer(
      "running_mean", Tensor::zeros({num_features}, DType::f32, MemoryCategory::parameter));
  running_var_ = register_buffer("running_var", Tensor::ones({num_features}));
  running_var_.set_category(MemoryCategory::parameter);
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check_input(x);
  MIXPREC_CHECK(x.size(1) == features_, ShapeError, type_name().c_str(),
                "expected " << features_ << " channels in dimension 1, got input "
                            << to_string(x.shape()));
  if (sync_ != nullptr && is_training()) {
    return ops::sync_batch_norm(*sync_, x, running_mean_, running_var_, weight_, bias_,
                                 momentum_, eps_);
  }
  return batch_norm(x, running_mean_, running_var_, weight_, bias_, is_training(), momentum_,
                    eps_);
}

bool BatchNormBase::fuses_relu() const {
  return runs_plainly() && (sync_ == nullptr || !is_training());
}

Tensor BatchNormBase::relu_forward(const Tensor& x, const Tensor& residual) {
  if (!fuses_relu()) {
    const Tensor y = (*this)(x);
    return relu(residual.defined() ? y + residual : y);
  }
  check_input(x);
  MIXPREC_CHECK(x.size(1) == features_, ShapeError, type_name().c_str(),
                "expected " << features_ << " channels in dimension 1, got input "
                            << to_string(x.shape()));
  return batch_norm_relu(x, running_mean_, running_var_, weight_, bias_, is_training(),
                         momentum_, eps_, residual);
}

Tensor BatchNormBase::relu_pool_forward(const Tensor& x, std::int64_t kernel) {
  if (!fuses_relu()) return max_pool2d(relu((*this)(x)), kernel);
  check_input(x);
  MIXPREC_CHECK(x.size(1) == features_, ShapeError, type_name().c_str(),
                "expected " << features_ << " channels in dimension 1, got input "
                            << to_string(x.shape()));
  return batch_norm_relu_max_pool2d(x, running_mean_, running_var_, weight_, bias_,
                                    is_training(), kernel, momentum_, eps_);
}

std::int64_t set_sync_batchnorm(Module& root, const runtime::Communicator* comm) {
  std::int64_t count = 0;
  if (auto* bn = dynamic_cast<BatchNormBase*>(&root)) {
    bn->set_sync(comm);
    ++count;
  }
  for (const auto& [name, child] : root.children()) count += set_sync_batchnorm(*child, comm);
  return count;
}

void BatchNorm2d::check_input(const Tensor& x) const {
  MIXPREC_CHECK(x.dim() == 4 || x.dim() == 2, ShapeError, "BatchNorm2d",
                "expected input [N, C, H, W] (or [N, C]), got " << to_string(x.shape()));
}

void BatchNorm1d::check_input(const Tensor& x) const {
  MIXPREC_CHECK(x.dim() == 2 || x.dim() == 3, ShapeError, "BatchNorm1d",
                "expected input [N, C] (or [N, C, L]), got " << to_string(x.shape()));
}

LayerNorm::LayerNorm(std::int64_t normalized_size, float eps) : size_(normalized_size), eps_(eps) {
  MIXPREC_CHECK(normalized_size > 0, ValueError, "LayerNorm",
                "normalized_size must be positive, got " << normalized_size);
  MIXPREC_CHECK(eps >= 0.0f, ValueError, "LayerNorm", "eps must be >= 0, got " << eps);
  weight_ = register_parameter("weight", Tensor::ones({normalized_size}));
  bias_ = register_parameter("bias", Tensor::zeros({normalized_size}));
}

Tensor LayerNorm::forward(const Tensor& x) {
  MIXPREC_CHECK(x.dim() >= 1 && x.size(-1) == size_, ShapeError, "LayerNorm",
                "expected input [..., " << size_ << "], got " << to_string(x.shape()));
  return layer_norm(x, 1, weight_, bias_, eps_);
}

ResidualNorm LayerNorm::add_then_forward(const Tensor& x, const Tensor& delta) {
  if (!runs_plainly()) {
    Tensor sum = x + delta;
    return {sum, (*this)(sum)};
  }
  MIXPREC_CHECK(x.dim() >= 1 && x.size(-1) == size_, ShapeError, "LayerNorm",
                "expected input [..., " << size_ << "], got " << to_string(x.shape()));
  return add_layer_norm(x, delta, 1, weight_, bias_, eps_);
}

}  // namespace mixprec::nn
