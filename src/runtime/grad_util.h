#pragma once
// Gradient plumbing of the autograd engine, straight on the kernels: a gradient copied into a
// leaf's dtype (materialize), added into a leaf's .grad (add_into), two gradients of one tensor
// summed (sum_gradients). The ops share these helpers (ops/op_util.h re-exports them), but they
// live here, below the ops, because the engine needs them and must not call up into ops/.
#include <span>

#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::runtime::detail {

/// The dtype an op with these inputs computes in when no autocast applies: the widest
/// (f32 if any input is f32 or if bf16 meets f16).
DType promote(DType a, DType b);

/// Kernel view of t over its own shape with its own strides.
kernels::StridedInput strided(const Tensor& t);

/// A fresh dense copy of t in dtype and `format`, filed under category.
Tensor materialize(const Tensor& t, DType dtype, MemoryCategory category,
                   MemoryFormat format = MemoryFormat::contiguous);

/// v (a 4-D shape or strides) in `format`'s memory order: [N, H, W, C] for channels_last, v
/// itself for contiguous. The element-wise kernels write their output row-major over the shape
/// they are given; given the shape and every operand's strides in the output's memory order,
/// they visit the same elements in the order they lie in a channels-last output.
Shape in_memory_order(std::span<const std::int64_t> v, MemoryFormat format);

/// out = op(a, b) over out's shape, a and b strided views of it (stride 0 where broadcast), out
/// dense in its memory_format() (the kernel runs in that memory order).
void binary_into(kernels::BinaryOp op, const kernels::StridedInput& a,
                 const kernels::StridedInput& b, const Tensor& out);

/// dst += src in place (same shape; dst contiguous); bumps dst's version.
void add_into(Tensor& dst, const Tensor& src);

/// a + b for two gradients of one tensor (promoting dtypes), outside autograd; channels-last
/// if both are.
Tensor sum_gradients(const Tensor& a, const Tensor& b);

}  // namespace mixprec::runtime::detail
