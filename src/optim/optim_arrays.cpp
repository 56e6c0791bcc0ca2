#include "optim/optim_arrays.h"

namespace mixprec::optim::detail {

kernels::OptimArrays optim_arrays(const Optimizer& opt, std::size_t i, const Tensor& grad) {
  const Tensor& p = opt.params().at(i);
  const Tensor& master = opt.master(i);
  kernels::OptimArrays a{};
  a.param = p.data_ptr();
  a.param_dtype = static_cast<int>(p.dtype());
  a.grad = grad.data_ptr();
  a.grad_dtype = static_cast<int>(grad.dtype());
  if (p.dtype() == DType::f32) {
    a.write = kernels::kWriteInPlace;
    if (opt.pending_copy_.defined()) {
      a.copy = opt.pending_copy_.data_ptr();
      a.copy_dtype = static_cast<int>(opt.pending_copy_.dtype());
      opt.pending_copy_taken_ = true;
    }
  } else if (master.defined()) {
    a.write = kernels::kWriteMaster;
    a.master = static_cast<float*>(master.data_ptr());
  } else {
    a.write = kernels::kWriteStochastic;
  }
  return a;
}

}  // namespace mixprec::optim::detail
