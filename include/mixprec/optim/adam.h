#pragma once
/// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), exactly as
/// torch.optim.Adam / torch.optim.AdamW (amsgrad and maximize are not supported).
#include <vector>

#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

/// Hyper-parameters of Adam and AdamW (PyTorch's names and defaults, except weight_decay, whose
/// default depends on the class: 0 for Adam, 1e-2 for AdamW).
struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;    ///< in [0, 1): decay of the first moment
  float beta2 = 0.999f;  ///< in [0, 1): decay of the second moment
  float eps = 1e-8f;     ///< > 0: added to sqrt(v_hat)
  float weight_decay = 0.0f;
  /// false: Adam's L2 (g += weight_decay * p); true: AdamW's decoupled p *= 1 - lr * weight_decay.
  bool decoupled_weight_decay = false;
};

/// Adam over f32, bf16 or f16 parameters (gradients of any of those dtypes). Per element, at a
/// parameter's update t: m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
/// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
/// State: "exp_avg" and "exp_avg_sq" (f32, 8 bytes per element).
class Adam : public Optimizer {
 public:
  /// Throws ValueError ("Adam: ..." or "AdamW: ...") on a bad parameter list or hyper-parameter.
  Adam(std::vector<Tensor> params, AdamOptions options = {}, OptimizerOptions common = {});
  const AdamOptions& hyper() const noexcept { return hyper_; }

 protected:
  void update(const std::vector<ParamUpdate>& updates) override;

 private:
  AdamOptions hyper_;
  std::vector<Tensor> exp_avg_;
  std::vector<Tensor> exp_avg_sq_;
};

/// Hyper-parameters of AdamW: AdamOptions with weight_decay 1e-2 and decoupled decay.
struct AdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 1e-2f;  ///< p *= 1 - lr * weight_decay before the Adam step
};

/// AdamW (Loshchilov & Hutter): Adam with weight decay decoupled from the gradient moments.
class AdamW : public Adam {
 public:
  /// Throws ValueError ("AdamW: ...") on a bad parameter list or hyper-parameter.
  AdamW(std::vector<Tensor> params, AdamWOptions options = {}, OptimizerOptions common = {});
};

}  // namespace mixprec::optim
