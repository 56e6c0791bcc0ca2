#pragma once
/// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay,
/// exactly as torch.optim.SGD.
#include <vector>

#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

/// Hyper-parameters of SGD (PyTorch's names and defaults).
struct SgdOptions {
  float lr = 1e-3f;
  float momentum = 0.0f;      ///< 0 disables the momentum buffer (no state is allocated)
  float dampening = 0.0f;     ///< in [0, 1]: the gradient enters the buffer scaled by 1 - dampening
  float weight_decay = 0.0f;  ///< L2 penalty: weight_decay * param is added to the gradient
  bool nesterov = false;      ///< needs momentum > 0 and dampening == 0
};

/// SGD over f32, bf16 or f16 parameters (gradients of any of those dtypes). Per element, with
/// g = grad + weight_decay * p: buf = momentum * buf + (1 - dampening) * g (buf = g at a
/// parameter's first update); d = nesterov ? g + momentum * buf : buf (g without momentum);
/// p -= lr * d. State: "momentum_buffer" (f32, only when momentum > 0).
class SGD : public Optimizer {
 public:
  /// Throws ValueError ("SGD: ...") on a bad parameter list or hyper-parameter.
  SGD(std::vector<Tensor> params, SgdOptions options = {}, OptimizerOptions common = {});
  const SgdOptions& hyper() const noexcept { return hyper_; }

 protected:
  void update(const std::vector<ParamUpdate>& updates) override;

 private:
  SgdOptions hyper_;
  std::vector<Tensor> momentum_;  ///< per param; undefined when momentum == 0
};

}  // namespace mixprec::optim
