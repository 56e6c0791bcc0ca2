#include "mixprec/optim/sgd.h"

#include <cmath>

#include "kernels/optim.h"
#include "mixprec/core/error.h"
#include "optim/optim_arrays.h"

namespace mixprec::optim {
namespace {

// Checks run before the base class allocates anything (it is built from the result).
const SgdOptions& validated(const SgdOptions& o) {
  MIXPREC_CHECK(o.momentum >= 0.0f && std::isfinite(o.momentum), ValueError, "SGD",
                "momentum must be finite and >= 0, got " << o.momentum);
  MIXPREC_CHECK(o.dampening >= 0.0f && o.dampening <= 1.0f, ValueError, "SGD",
                "dampening must be in [0, 1], got " << o.dampening);
  MIXPREC_CHECK(o.weight_decay >= 0.0f && std::isfinite(o.weight_decay), ValueError, "SGD",
                "weight_decay must be finite and >= 0, got " << o.weight_decay);
  MIXPREC_CHECK(!o.nesterov || (o.momentum > 0.0f && o.dampening == 0.0f), ValueError, "SGD",
                "nesterov momentum requires momentum > 0 and dampening == 0 (got momentum "
                    << o.momentum << ", dampening " << o.dampening
                    << "); set them or turn nesterov off");
  return o;
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SgdOptions options, OptimizerOptions common)
    : Optimizer("SGD", std::move(params), validated(options).lr, common), hyper_(options) {
  momentum_.resize(this->params().size());
  if (hyper_.momentum == 0.0f) return;
  for (std::size_t i = 0; i < momentum_.size(); ++i) momentum_[i] = add_state(i, "momentum_buffer");
}

void SGD::update(const std::vector<ParamUpdate>& updates) {
  const auto complete = [&](const ParamUpdate& u, kernels::OptimArrays& a, kernels::SgdScalars& s) {
    const std::size_t i = u.index;
    if (momentum_[i].defined()) a.state0 = static_cast<float*>(momentum_[i].data_ptr());
    s.lr = static_cast<float>(param_lr(i));
    s.momentum = hyper_.momentum;
    s.one_minus_dampening = static_cast<float>(1.0 - static_cast<double>(hyper_.dampening));
    s.weight_decay = param_weight_decay(i, hyper_.weight_decay);
    s.nesterov = hyper_.nesterov ? 1 : 0;
    // PyTorch keeps the buffer as None until a parameter's first update, then clones g into it.
    s.first_step = u.param_step == 1 ? 1 : 0;
  };
  detail::update_in_batches<kernels::SgdScalars>(*this, updates, complete,
                                                 kernels::sgd_update_batch);
  for (const ParamUpdate& u : updates) {
    if (momentum_[u.index].defined()) momentum_[u.index].bump_version();
  }
}

}  // namespace mixprec::optim
