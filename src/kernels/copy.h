#pragma once
/// Strided copy with dtype conversion: the kernel behind contiguous(), casts and slice writes.
#include <cstdint>
#include <span>

#include "kernels/elementwise.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// A writable strided operand (strides in elements, over the shape passed to the kernel).
struct StridedOutput {
  void* data;
  DType dtype;
  std::span<const std::int64_t> strides;

  /// Calls f(dtype): the one dtype of the operand (kernels/dtype_visit.h).
  template <class F>
  void for_each_dtype(F&& f) const { f(dtype); }
};

namespace ref {
/// out[idx] = in[idx] converted to out's dtype (round to nearest even) for every index of shape.
/// Contiguous-to-contiguous copies go through the vectorised bulk conversions.
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out);
}  // namespace ref

/// The copy kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_COPY_KERNELS(X) X(copy)
MIXPREC_COPY_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
