#pragma once
/// Differentiable elementwise ops. Unary ops keep the input dtype; binary ops broadcast (numpy
/// rules) and compute in the wider dtype of their inputs (f32 if any is f32, or bf16 meets f16).
/// Every op computes in f32 internally and rounds once to the output dtype.
#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor square(const Tensor& x);
Tensor relu(const Tensor& x);
/// Exact (erf) GELU: x * Phi(x).
Tensor gelu(const Tensor& x);
/// Which GELU: the exact erf form, or the tanh approximation of GPT-2/BERT (PyTorch's
/// approximate='tanh').
enum class GeluApproximation : std::uint8_t { none, tanh };
/// GELU with a choice of form. GeluApproximation::tanh computes
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as x / (1 + e^-w) with
/// w = 2 sqrt(2/pi) (x + 0.044715 x^3) (the same function, without the cancellation of 1 + tanh
/// for negative x); accuracy in src/kernels/elementwise.h. Same autocast row as gelu(x).
Tensor gelu(const Tensor& x, GeluApproximation approximate);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
/// x ** exponent elementwise (computed in f32; NaN for negative x with a non-integer exponent).
Tensor pow(const Tensor& x, float exponent);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
/// Elementwise maximum; NaN propagates. The gradient goes to a where a >= b, else to b.
Tensor maximum(const Tensor& a, const Tensor& b);
/// Elementwise minimum; NaN propagates. The gradient goes to a where a <= b, else to b.
Tensor minimum(const Tensor& a, const Tensor& b);
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
