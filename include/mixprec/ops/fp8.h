#pragma once
/// FP8 (E4M3, E5M2) tensors in computations. fp8 is a storage dtype here: matmul() and linear()
/// accept fp8 operands by decoding them exactly to f32 (a 256-entry table) and running the f32
/// GEMM with f32 accumulation; the result is f32 (see docs/fp8.md for why there is no fp8
/// output). This header adds per-tensor scaling, which real fp8 training needs because the
/// formats' range is small (E4M3 tops out at 448): quantise with a power-of-two scale chosen from
/// max |x|, multiply, and apply the two scales to the f32 result.
#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// An fp8 tensor and its dequantisation scale: the values represented are tensor * scale.
struct Fp8Quantized {
  Tensor tensor;       ///< f8e4m3 or f8e5m2, the shape of the input
  float scale = 1.0f;  ///< a power of two, so applying it is exact
};

/// Quantises x (any dtype, fp8 included) to `format` (f8e4m3 or f8e5m2) with a per-tensor
/// power-of-two scale 2^k: k is the smallest integer with max|x| / 2^k <= format max, so the
/// largest magnitude lands in (max/2, max] and nothing overflows; k is clamped to [-126, 127]
/// (an all-zero x gets scale 1). The tensor holds round_to_nearest_even(x / 2^k), computed from
/// x widened to f32 (exact), so each element is rounded once. Differentiable: the cast is
/// straight-through, so d tensor / dx = 1 / scale, in f32. DTypeError if format is not fp8;
/// ValueError if x holds NaN or Inf (no scale can bring them into range).
Fp8Quantized fp8_quantize(const Tensor& x, DType format);

/// (a * scale_a) @ (b * scale_b) for fp8 a [M, K] and b [K, N] (or batched [B, M, K] @
/// [B, K, N], formats may differ): the emulated fp8 matmul with f32 accumulation, then the
/// product of the scales applied to the f32 result (exact for power-of-two scales unless the
/// result over- or underflows f32). Returns f32; differentiable in a and b. DTypeError unless
/// both operands are fp8; ValueError unless both scales are positive and finite.
Tensor fp8_scaled_matmul(const Tensor& a, float scale_a, const Tensor& b, float scale_b);
/// fp8_scaled_matmul(a.tensor, a.scale, b.tensor, b.scale).
Tensor fp8_scaled_matmul(const Fp8Quantized& a, const Fp8Quantized& b);

}  // namespace mixprec
