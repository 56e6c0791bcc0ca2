#pragma once
/// masked_fill: replace the elements a mask selects by one value (attention masks). A selection,
/// not arithmetic: every element is either x's bits or the value's, so the cpu backend is
/// bit-identical to the reference. kernels::ref:: is the spec; kernels:: dispatches.
#include <cstdint>
#include <span>

#include "kernels/elementwise.h"
#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// out[i] = mask[i] != 0 ? value : x[i] over `shape`. x and out are contiguous row-major of
/// dtype (f32, bf16 or f16; out may be x itself); mask is a strided view of `shape` (stride 0
/// where it is broadcast) of any compute dtype, nonzero meaning fill (NaN counts as nonzero, as
/// in where()). value is rounded once to dtype (e.g. -1e9 becomes -Inf in f16). x's elements
/// are copied bit for bit (NaN payloads included).
void masked_fill(std::span<const std::int64_t> shape, const void* x, DType dtype,
                 const StridedInput& mask, float value, void* out);
/// out[i] = cond[i] != 0 ? a[i] : b[i] for n contiguous elements (where()): a, b and out of
/// dtype (any, fp8 included: only bits move), cond of any compute dtype (NaN counts as nonzero).
/// A selection, so Inf or NaN in the branch not taken never reaches out.
void where(std::int64_t n, const void* cond, DType cond_dtype, const void* a, const void* b,
           DType dtype, void* out);
}  // namespace ref

namespace detail {
/// The element count of shape after masked_fill's checks (ShapeError: a mask stride count that
/// is not the rank, a negative dimension), which every backend's masked_fill makes first.
std::int64_t masked_fill_count(std::span<const std::int64_t> shape, const StridedInput& mask);
}  // namespace detail

/// The masked_fill kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_MASKED_FILL_KERNELS(X) X(masked_fill) X(where)
MIXPREC_MASKED_FILL_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
