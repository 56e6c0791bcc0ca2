#include "mixprec/optim/adam.h"

#include <cmath>

#include "kernels/optim.h"
#include "mixprec/core/error.h"
#include "optim/optim_arrays.h"

namespace mixprec::optim {
namespace {

const char* op_name(const AdamOptions& o) { return o.decoupled_weight_decay ? "AdamW" : "Adam"; }

// Checks run before the base class allocates anything (it is built from the result).
const AdamOptions& validated(const AdamOptions& o) {
  const char* op = op_name(o);
  MIXPREC_CHECK(o.beta1 >= 0.0f && o.beta1 < 1.0f, ValueError, op,
                "beta1 must be in [0, 1), got " << o.beta1 << " (typical: 0.9)");
  MIXPREC_CHECK(o.beta2 >= 0.0f && o.beta2 < 1.0f, ValueError, op,
                "beta2 must be in [0, 1), got " << o.beta2 << " (typical: 0.999)");
  MIXPREC_CHECK(o.eps > 0.0f && std::isfinite(o.eps), ValueError, op,
                "eps must be finite and > 0, got " << o.eps << " (typical: 1e-8)");
  MIXPREC_CHECK(o.weight_decay >= 0.0f && std::isfinite(o.weight_decay), ValueError, op,
                "weight_decay must be finite and >= 0, got " << o.weight_decay);
  return o;
}

AdamOptions as_adam(const AdamWOptions& o) {
  return AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, true};
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options, OptimizerOptions common)
    : Optimizer(op_name(options), std::move(params), validated(options).lr, common),
      hyper_(options) {
  const std::size_t n = this->params().size();
  for (std::size_t i = 0; i < n; ++i) {
    exp_avg_.push_back(add_state(i, "exp_avg"));
    exp_avg_sq_.push_back(add_state(i, "exp_avg_sq"));
  }
}

void Adam::update(const std::vector<ParamUpdate>& updates) {
  const auto complete = [&](const ParamUpdate& u, kernels::OptimArrays& a, kernels::AdamScalars& s) {
    const std::size_t i = u.index;
    a.state0 = static_cast<float*>(exp_avg_[i].data_ptr());
    a.state1 = static_cast<float*>(exp_avg_sq_[i].data_ptr());
    // Scalars in double, rounded once to f32, as PyTorch does with its Python-float arithmetic.
    const double lr = param_lr(i);
    const double beta1 = hyper_.beta1;
    const double beta2 = hyper_.beta2;
    const double t = static_cast<double>(u.param_step);
    const double bias_correction1 = 1.0 - std::pow(beta1, t);
    const double bias_correction2 = 1.0 - std::pow(beta2, t);
    s.beta1 = hyper_.beta1;
    s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
    s.beta2 = hyper_.beta2;
    s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
    s.eps = hyper_.eps;
    const float weight_decay = param_weight_decay(i, hyper_.weight_decay);
    const double wd = weight_decay;
    s.l2_weight_decay = hyper_.decoupled_weight_decay ? 0.0f : weight_decay;
    s.decay = hyper_.decoupled_weight_decay ? static_cast<float>(1.0 - lr * wd) : 1.0f;
    s.step_size = static_cast<float>(lr / bias_correction1);
    s.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(bias_correction2));
  };
  detail::update_in_batches<kernels::AdamScalars>(*this, updates, complete,
                                                  kernels::adam_update_batch);
  for (const ParamUpdate& u : updates) {
    exp_avg_[u.index].bump_version();
    exp_avg_sq_[u.index].bump_version();
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options, OptimizerOptions common)
    : Adam(std::move(params), as_adam(options), common) {}

}  // namespace mixprec::optim
