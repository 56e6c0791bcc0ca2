#pragma once
/// Differentiable reductions. They accumulate in f32 whatever the dtype and return the input
/// dtype (so the sum of 1024 bf16 ones is exactly 1024, not the 256 a bf16 running sum gives).
#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// Sum of all elements (0-d result).
Tensor sum(const Tensor& x);
/// Sum along dim; keepdim keeps it with size 1.
Tensor sum(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Mean of all elements (0-d result).
Tensor mean(const Tensor& x);
/// Mean along dim.
Tensor mean(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Maximum along dim (NaN propagates); the gradient is shared equally among tied maxima.
Tensor amax(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Running sum along the last dimension (accumulated in f32), same shape as x.
Tensor cumsum(const Tensor& x);
/// Maximum of |x| over all elements (0-d, not differentiable: a diagnostic).
Tensor max_abs(const Tensor& x);
/// Euclidean norm of all elements (0-d), accumulated in f32.
Tensor norm(const Tensor& x);

}  // namespace mixprec
