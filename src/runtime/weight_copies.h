#pragma once
// The weight-copy store in use on this thread (mixprec/runtime/weight_copies.h), as autocast and
// the optimizer call it.
#include "mixprec/runtime/weight_copies.h"

namespace mixprec::runtime::detail {

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

}  // namespace mixprec::runtime::detail
