#pragma once
/// The 16-bit copies of f32 parameters that autocast makes, kept from one step to the next so
/// that the optimizer can write them in its update pass (kernels/optim.h, OptimArrays::copy)
/// instead of autocast reading every f32 weight again to cast it at the next forward.
///
/// A copy is current while its parameter's version (storage version counter) is the one it was
/// made or written at: any other in-place change to the parameter (a checkpoint load, an EMA
/// swap, a user's edit) bumps the version, and autocast casts afresh. Process-wide and
/// thread-safe; an entry dies with its parameter (checked on every publish).
#include "mixprec/tensor/tensor.h"

namespace mixprec::amp::detail {

/// The current copy of param in dtype, or an undefined tensor.
Tensor current_weight_copy(const Tensor& param, DType dtype);
/// Records copy (param cast to copy.dtype(), at param's current version).
void publish_weight_copy(const Tensor& param, const Tensor& copy);
/// The copy the optimizer may overwrite in place with param's next value: only when the store is
/// its sole owner (a copy still saved by an autograd graph or held by a caller is never changed
/// under it). Undefined otherwise.
Tensor writable_weight_copy(const Tensor& param);
/// After the optimizer wrote writable_weight_copy(param) and bumped param's version: the copy is
/// current at the new version.
void mark_weight_copy_current(const Tensor& param);
/// Forgets every copy (tests; frees their memory).
void clear_weight_copies();

}  // namespace mixprec::amp::detail
