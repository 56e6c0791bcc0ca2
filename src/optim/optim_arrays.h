#pragma once
/// The kernel view (kernels/optim.h) of one parameter of an optimizer, built from the optimizer's
/// public accessors: the public header mixprec/optim/optimizer.h then names no kernel type.
#include <cstddef>

#include "kernels/optim.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::optim::detail {

/// The arrays of parameter i of `opt` updated with `grad` (contiguous, same shape): parameter,
/// gradient, fp32 master and write mode (f32: in place; 16-bit: through the master if the
/// optimizer keeps one, else stochastic rounding). The state pointers are left null.
kernels::OptimArrays optim_arrays(const Optimizer& opt, std::size_t i, const Tensor& grad);

}  // namespace mixprec::optim::detail
