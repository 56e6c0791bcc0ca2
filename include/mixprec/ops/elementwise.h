#pragma once
/// Differentiable elementwise ops. Unary ops keep the input dtype; binary ops broadcast (numpy
/// rules) and compute in the wider dtype of their inputs (f32 if any is f32, or bf16 meets f16).
/// Every op computes in f32 internally and rounds once to the output dtype.
#include <cstdint>

#include "mixprec/core/op_list.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// Tensor op(const Tensor& x) for every unary op of mixprec/core/op_list.h whose api is fn
/// (relu(x), gelu(x) in the exact erf form, silu(x), ...): the list says what each computes,
/// its autocast row and its gradient's accuracy.
#define MIXPREC_DECLARE_UNARY_FN(op, api, ...) MIXPREC_OP_IF_##api(Tensor op(const Tensor& x);)
MIXPREC_UNARY_OPS(MIXPREC_DECLARE_UNARY_FN)
#undef MIXPREC_DECLARE_UNARY_FN
/// Which GELU: the exact erf form, or the tanh approximation of GPT-2/BERT (PyTorch's
/// approximate='tanh').
enum class GeluApproximation : std::uint8_t { none, tanh };
/// GELU with a choice of form. GeluApproximation::tanh computes
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as x / (1 + e^-w) with
/// w = 2 sqrt(2/pi) (x + 0.044715 x^3) (the same function, without the cancellation of 1 + tanh
/// for negative x); accuracy in src/kernels/elementwise.h. Same autocast row as gelu(x).
Tensor gelu(const Tensor& x, GeluApproximation approximate);
/// x ** exponent elementwise (computed in f32; NaN for negative x with a non-integer exponent).
Tensor pow(const Tensor& x, float exponent);

/// One differentiable function per binary op of the list whose api is fn: add, sub, mul, div,
/// maximum and minimum (NaN propagates; the gradient goes to a where a wins or ties, else to b).
#define MIXPREC_DECLARE_BINARY_FN(op, api, ...) \
  MIXPREC_OP_IF_##api(Tensor op(const Tensor& a, const Tensor& b);)
MIXPREC_BINARY_OPS(MIXPREC_DECLARE_BINARY_FN)
#undef MIXPREC_DECLARE_BINARY_FN
/// alpha * x + beta in x's dtype.
Tensor affine(const Tensor& x, float alpha, float beta);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator*(const Tensor& x, float s) { return affine(x, s, 0.0f); }
inline Tensor operator*(float s, const Tensor& x) { return affine(x, s, 0.0f); }
inline Tensor operator+(const Tensor& x, float s) { return affine(x, 1.0f, s); }
inline Tensor operator-(const Tensor& x, float s) { return affine(x, 1.0f, -s); }

/// Cast to dtype, differentiable (the gradient is cast back to the input dtype).
Tensor cast(const Tensor& x, DType dtype);

}  // namespace mixprec
