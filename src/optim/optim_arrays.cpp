#include "optim/optim_arrays.h"

namespace mixprec::optim::detail {

kernels::OptimArrays optim_arrays(const Optimizer& opt, const ParamUpdate& u) {
  const std::size_t i = u.index;
  const Tensor& grad = u.grad;
  const Tensor& p = opt.params().at(i);
  const Tensor& master = opt.master(i);
  kernels::OptimArrays a{};
  a.param = p.data_ptr();
  a.param_dtype = p.dtype();
  a.grad = grad.data_ptr();
  a.grad_dtype = grad.dtype();
  if (p.dtype() == DType::f32) {
    a.write = kernels::kWriteInPlace;
    const Tensor& copy = opt.pending_copies_.at(i);
    if (copy.defined()) {
      a.copy = copy.data_ptr();
      a.copy_dtype = copy.dtype();
      opt.pending_copy_taken_.at(i) = 1;
    }
  } else if (master.defined()) {
    a.write = kernels::kWriteMaster;
    a.master = static_cast<float*>(master.data_ptr());
  } else {
    a.write = kernels::kWriteStochastic;
  }
  if (opt.grad_multiplier_.defined()) {
    a.grad_multiplier = static_cast<const float*>(opt.grad_multiplier_.data_ptr());
  }
  return a;
}

}  // namespace mixprec::optim::detail
