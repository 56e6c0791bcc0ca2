#pragma once
// Private: the fp8 emulation behind matmul() and linear() (src/ops/fp8_ops.cpp).
#include <initializer_list>

#include "mixprec/tensor/tensor.h"

namespace mixprec::ops::detail {

/// True if any defined tensor in the list has a storage-only (fp8) dtype.
bool any_fp8(std::initializer_list<const Tensor*> tensors);

/// matmul() with fp8 operands: both must be fp8 (DTypeError otherwise); each is decoded exactly
/// to f32 by a differentiable cast (straight-through gradient, in f32), then multiplied by the
/// f32 GEMM outside any autocast region. Returns f32.
Tensor fp8_matmul(const Tensor& a, const Tensor& b);

/// linear() with fp8 operands: x and weight must both be fp8; bias may have any dtype (it is
/// widened to f32). Same decoding and f32 result as fp8_matmul.
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace mixprec::ops::detail
