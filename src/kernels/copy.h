#pragma once
/// Strided copy with dtype conversion: the kernel behind contiguous(), casts and slice writes.
#include <cstdint>
#include <span>

#include "kernels/elementwise.h"

namespace mixprec::kernels {

/// A writable strided operand (strides in elements, over the shape passed to the kernel).
struct StridedOutput {
  void* data;
  DType dtype;
  std::span<const std::int64_t> strides;
};

/// out[idx] = in[idx] converted to out's dtype (round to nearest even) for every index of shape.
/// Contiguous-to-contiguous copies go through the vectorised bulk conversions.
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out);

namespace ref {
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out);
}  // namespace ref

namespace cpu {
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out);
}  // namespace cpu

}  // namespace mixprec::kernels
