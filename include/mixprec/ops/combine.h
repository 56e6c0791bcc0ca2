#pragma once
/// Ops that combine several tensors: concatenation, stacking, selection. Inputs of different
/// dtypes are combined in the widest (f32 if any is f32, or if bf16 meets f16).
#include <cstdint>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// Joins tensors along dim; all other dimensions must match.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// Stacks same-shaped tensors along a new dimension dim.
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// Elementwise condition != 0 ? a : b; all three of the same shape. The gradient flows to a where
/// the condition holds and to b elsewhere; none flows to the condition.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

}  // namespace mixprec
