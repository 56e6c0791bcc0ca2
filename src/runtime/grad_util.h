#pragma once
// Gradient plumbing of the autograd engine, straight on the kernels: a gradient copied into a
// leaf's dtype (materialize), added into a leaf's .grad (add_into), two gradients of one tensor
// summed (sum_gradients). The ops share these helpers (ops/op_util.h re-exports them), but they
// live here, below the ops, because the engine needs them and must not call up into ops/.
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::runtime::detail {

/// The dtype an op with these inputs computes in when no autocast applies: the widest
/// (f32 if any input is f32 or if bf16 meets f16).
DType promote(DType a, DType b);

/// Kernel view of t over its own shape with its own strides.
kernels::StridedInput strided(const Tensor& t);

/// A fresh contiguous copy of t in dtype, filed under category.
Tensor materialize(const Tensor& t, DType dtype, MemoryCategory category);

/// dst += src in place (same shape; dst contiguous); bumps dst's version.
void add_into(Tensor& dst, const Tensor& src);

/// a + b for two gradients of one tensor (promoting dtypes), outside autograd.
Tensor sum_gradients(const Tensor& a, const Tensor& b);

}  // namespace mixprec::runtime::detail
