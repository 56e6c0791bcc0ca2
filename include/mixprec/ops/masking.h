#pragma once
/// Masks for attention: masked_fill and the causal mask it is usually given.
#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// x with the elements the mask selects replaced by value: out = mask != 0 ? value : x. The mask
/// follows where()'s convention (a tensor of any compute dtype, nonzero or NaN = selected) and
/// broadcasts to x's shape (numpy rules; the output has x's shape and dtype; autocast:
/// pass-through). value is rounded once to x's dtype: -Inf, or a large negative number that fits
/// the dtype (f16's largest is 65504; -1e9 becomes -Inf there). Backward: x's gradient is the
/// output gradient with the selected elements zeroed; the mask gets none.
/// Errors: ShapeError if the mask does not broadcast to x's shape; DTypeError for fp8 x or mask.
Tensor masked_fill(const Tensor& x, const Tensor& mask, float value);

/// The causal attention mask for t positions: [t, t] in dtype, 1 where key j lies after query i
/// (j > i, the entries to hide), else 0; so masked_fill(scores, causal_mask(T), -inf) leaves
/// each query the keys up to itself. A constant: no gradient. ValueError for negative t.
Tensor causal_mask(std::int64_t t, DType dtype = DType::f32);

}  // namespace mixprec
