#pragma once
// How far the gelu_tanh post-op's outputs (kernels/matmul.h) may be from the reference's beyond
// the GEMM's summation order, for the conformance cases and the GPU test: docs/cuda.md, "GELU
// epilogues". A backend may round the pre-activation (forward) or the GEMM's result (backward)
// differently before GELU, which |gelu_tanh'| <= 1.13 carries into the output, and cuBLASLt
// applies GELU to the unrounded f32 sum with a tanh that may be the hardware approximation
// (relative error 2^-10.99): 0.5 |x| times that forward, about 6 2^-11 of |dG| in the derivative
// for |x| <= 3.
#include <cmath>

#include "mixprec/core/dtype.h"

namespace mixprec::ktest {

/// The allowance of C's element whose pre-activation is h (the reference's), forward.
inline double gelu_forward_slack(DType t, double h) {
  return (2.0 * traits(t).epsilon + 1.0 / 2048.0) * std::fabs(h);
}
/// The allowance of C's element whose GEMM result is d (op(A) op(B) in f32), backward; of the
/// bias gradient with d the column's sum of |D|.
inline double gelu_backward_slack(DType t, double d) {
  return (2.0 * traits(t).epsilon + 1.0 / 128.0) * std::fabs(d);
}

}  // namespace mixprec::ktest
