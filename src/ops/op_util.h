#pragma once
// Private helpers shared by the op implementations: argument checks, broadcasting, strided
// views for kernels. The gradient plumbing the autograd engine needs too (materialize,
// add_into, sum_gradients, promote, strided) lives below the ops, in runtime/grad_util.h, and
// is re-exported here under its old names.
#include <initializer_list>
#include <memory>
#include <vector>

#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "mixprec/runtime/node.h"
#include "mixprec/tensor/tensor.h"
#include "runtime/grad_util.h"
#include "runtime/weight_copies.h"

namespace mixprec::ops::detail {

/// Throws StateError naming `op` if t is undefined (default-constructed or moved-from).
void require_defined(const char* op, const Tensor& t, const char* arg);

using runtime::detail::add_into;
using runtime::detail::binary_into;
using runtime::detail::materialize;
using runtime::detail::promote;
using runtime::detail::strided;
using runtime::detail::sum_gradients;

/// Broadcast shape of two shapes (numpy rules); ShapeError naming op if incompatible.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

/// Strides of t viewed at the broadcast shape `shape` (0 where t is broadcast).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

/// The memory format of op(a, b)'s output: channels-last if an operand of the output's shape is
/// (a convnet's residual add and ReLU keep the layout), else contiguous.
MemoryFormat output_format(const Shape& shape, const Tensor& a, const Tensor& b);

/// op(a, b) broadcast, in dtype (promote(a, b) by default), with no autograd and no autocast,
/// in output_format(): the raw kernel call the ops and their backward passes share (masks: eq, ge; pow).
Tensor binary_raw(kernels::BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_raw(kernels::BinaryOp op, const Tensor& a, const Tensor& b, DType dtype);

/// Records the autograd node of op(a, b) on out, as the op's function does (out computed from
/// a and b by the caller; nothing recorded unless a or b needs a gradient): for fused kernels
/// that compute a binary op inside them (add_layer_norm's residual sum).
void record_binary(kernels::BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b);

/// Index values (class targets, token ids) copied to the current device, where kernels read them:
/// one counted upload (reason `why`), the documented point where a batch's indices cross.
std::shared_ptr<Storage> upload_indices(const std::vector<std::int64_t>& indices, const char* why);

/// Sums grad over the broadcast dimensions so that it gets `shape` (the backward of broadcasting).
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

/// Normalises a possibly negative dimension index for an nd-d tensor; ValueError naming op.
std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t nd);

/// Creates the node, links it to the inputs and to output, if any input needs a gradient.
template <class NodeT, class... Args>
void record(Tensor& output, std::initializer_list<const Tensor*> inputs, Args&&... args) {
  if (!runtime::needs_grad(inputs)) return;
  runtime::attach(output, std::make_shared<NodeT>(std::forward<Args>(args)...), inputs);
}

}  // namespace mixprec::ops::detail
