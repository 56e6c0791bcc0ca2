#pragma once
// Private helpers shared by the op implementations: argument checks, broadcasting, strided
// views for kernels, and gradient plumbing used by the autograd engine.
#include <initializer_list>
#include <memory>
#include <vector>

#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "mixprec/runtime/node.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::ops::detail {

/// Throws StateError naming `op` if t is undefined (default-constructed or moved-from).
void require_defined(const char* op, const Tensor& t, const char* arg);

/// The dtype an op with these inputs computes in when no autocast applies: the widest
/// (f32 if any input is f32 or if bf16 meets f16).
DType promote(DType a, DType b);

/// Broadcast shape of two shapes (numpy rules); ShapeError naming op if incompatible.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

/// Strides of t viewed at the broadcast shape `shape` (0 where t is broadcast).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

/// Kernel view of t over its own shape with its own strides.
kernels::StridedInput strided(const Tensor& t);

/// op(a, b) broadcast, in dtype (promote(a, b) by default), with no autograd and no autocast:
/// the raw kernel call the ops and their backward passes share (masks: eq, ge; pow).
Tensor binary_raw(kernels::BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_raw(kernels::BinaryOp op, const Tensor& a, const Tensor& b, DType dtype);

/// Index values (class targets, token ids) copied to the current device, where kernels read them:
/// one counted upload (reason `why`), the documented point where a batch's indices cross.
std::shared_ptr<Storage> upload_indices(const std::vector<std::int64_t>& indices, const char* why);

/// A fresh contiguous copy of t in dtype, filed under category.
Tensor materialize(const Tensor& t, DType dtype, MemoryCategory category);

/// x cast to copy.dtype() once more without converting: copy (detached, made from x at its
/// current version) is shared, with a fresh cast node linking it to x for the backward pass.
/// How autocast reuses a weight's 16-bit copy across steps (amp/weight_copies.h).
Tensor reuse_cast(const Tensor& x, const Tensor& copy);

/// dst += src in place (same shape; dst contiguous); bumps dst's version.
void add_into(Tensor& dst, const Tensor& src);

/// a + b for two gradients of one tensor (promoting dtypes), outside autograd.
Tensor sum_gradients(const Tensor& a, const Tensor& b);

/// Sums grad over the broadcast dimensions so that it gets `shape` (the backward of broadcasting).
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

/// Normalises a possibly negative dimension index for an nd-d tensor; ValueError naming op.
std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t nd);

/// Creates the node, links it to the inputs and to output, if any input needs a gradient.
template <class NodeT, class... Args>
void record(Tensor& output, std::initializer_list<const Tensor*> inputs, Args&&... args) {
  if (!autograd::needs_grad(inputs)) return;
  autograd::attach(output, std::make_shared<NodeT>(std::forward<Args>(args)...), inputs);
}

}  // namespace mixprec::ops::detail
