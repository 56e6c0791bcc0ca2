#pragma once
/// When the cuda backend's memory-bound kernels (elementwise.cu, convert.cu) move their operands
/// 16 bytes at a time. Host logic only, so tests check it on machines without a GPU; the device
/// side (the packs and the loop that walks them) is vector_io.cuh.
///
/// A kernel on the vector path reads and writes 8 consecutive elements per step (one 16-byte
/// access of a 16-bit dtype, two of f32, 8 bytes of fp8) and the last n % 8 elements one at a
/// time; each element gets the same per-element math and the same rounding as on the scalar
/// path, so the two give the same bits. Elementwise kernels are bound by memory, and a warp's
/// 2-byte loads of bf16 move 64 bytes per instruction where 16-byte loads move 512.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cuda {

/// Bytes of one vector access (ld.global.v4.b32), and the alignment the vector path needs.
inline constexpr std::size_t kVectorBytes = 16;
/// Elements per step of the vector path (16 bytes of bf16/f16).
inline constexpr int kPackElements = 8;

/// How an elementwise call walks its operands.
enum class ElementwisePath {
  packs,       ///< contiguous, every operand 16-byte aligned: 8 elements per step
  contiguous,  ///< contiguous but an operand misaligned: one element per step, index i
  strided,     ///< strided or broadcast: one element per step through the layout's offsets
};

/// An operand of an elementwise call: its address and dtype.
struct VectorOperand {
  const void* data;
  DType dtype;
};

/// Whether p is 16-byte aligned (null counts as aligned: an operand the call does not read).
bool aligned16(const void* p);

/// The path of a call whose element types are template arguments (convert, copy: any dtype,
/// fp8 included): packs where `contiguous` and every pointer is 16-byte aligned; contiguous
/// where only `contiguous`; else strided.
ElementwisePath typed_path(bool contiguous, std::initializer_list<const void*> pointers);

/// The path of an elementwise call whose loads widen to f32 by dtype (launch.cuh's load and
/// store): packs where `contiguous` and every operand is 16-byte aligned and of f32, bf16 or f16
/// (the dtypes those loads read); contiguous where only `contiguous`; else strided.
ElementwisePath elementwise_path(bool contiguous, std::initializer_list<VectorOperand> operands);

/// Whether a view of `shape` with `strides` (in elements) is row-major contiguous: element i at
/// offset i. Dimensions of size 1 may have any stride; a view with no elements is contiguous.
bool row_major_contiguous(std::span<const std::int64_t> shape,
                          std::span<const std::int64_t> strides);

}  // namespace mixprec::kernels::cuda
