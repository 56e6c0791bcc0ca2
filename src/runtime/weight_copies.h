#pragma once
// The weight-copy store in use on this thread (mixprec/runtime/weight_copies.h), as autocast and
// the optimizer call it, and the cast node autocast wraps around a kept copy.
#include "mixprec/runtime/weight_copies.h"

namespace mixprec::amp::detail {

/// weight_copies().current(param, dtype): the current copy of param in dtype, or undefined.
Tensor current_weight_copy(const Tensor& param, DType dtype);
/// weight_copies().publish(param, copy).
void publish_weight_copy(const Tensor& param, const Tensor& copy);
/// weight_copies().writable(param).
Tensor writable_weight_copy(const Tensor& param);
/// weight_copies().mark_current(param).
void mark_weight_copy_current(const Tensor& param);
/// weight_copies().clear() (tests; frees their memory).
void clear_weight_copies();

}  // namespace mixprec::amp::detail

namespace mixprec::ops::detail {

/// x cast to copy.dtype() once more without converting: copy (detached, made from x at its
/// current version) is shared, with a fresh cast node linking it to x for the backward pass.
/// How autocast reuses a weight's 16-bit copy across steps. Defined with the cast op
/// (src/ops/elementwise_ops.cpp): like Tensor::to(DType), declared below the ops and defined by
/// them.
Tensor reuse_cast(const Tensor& x, const Tensor& copy);

}  // namespace mixprec::ops::detail
