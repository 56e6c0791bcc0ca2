#pragma once
/// The per-element math of every elementwise op, written once: each op of the list in
/// mixprec/core/op_list.h is a struct here with
///   forward(x)      -> y
///   backward(v, dy) -> dx, v the forward input x or output y as the list's `reads` column says
/// (binary ops: apply(a, b)). Values are f32 and every operation is an IEEE f32 operation in the
/// order written (the library builds with -ffp-contract=off), so these are the specification:
/// the reference kernels loop over them, a device backend compiles them (MIXPREC_HD), and the
/// vector kernels (cpu/vecmath-inl.h, same names under cpu::vec) repeat the exact operations
/// in the same order and differ only inside the transcendental functions, within the list's ulp
/// bounds.
#include <cmath>

#include "kernels/spec/host_device.h"
#include "kernels/spec/nan_minmax.h"

namespace mixprec::kernels::math {

inline constexpr float kSqrt1_2 = 0.70710678118654752f;    // 1/sqrt(2)
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1/sqrt(2 pi)
// gelu_tanh: w = x (c1 + c2 x^2) = 2 sqrt(2/pi) (x + 0.044715 x^3); dw/dx = c1 + 3 c2 x^2.
inline constexpr float kGeluTanhC1 = 1.5957691216057308f;    // 2 sqrt(2/pi)
inline constexpr float kGeluTanhC2 = 0.071354816272600249f;  // 0.044715 * c1
inline constexpr float kGeluTanhC3 = 0.21406444881780075f;   // 3 * c2
/// Beyond |x| = 10 the gelu_tanh gradient is 1 (x > 10, exactly in f32) or 0 (x < -10, true
/// value below 3e-36); the formula is not evaluated there, so e^-w = Inf never meets s = 0.
inline constexpr float kGeluTanhGradEdge = 10.0f;

// ------------------------------------------------------------------ unary ops

struct neg {
  MIXPREC_HD static float forward(float x) { return -x; }
  MIXPREC_HD static float backward(float, float dy) { return -dy; }
};
struct abs {
  MIXPREC_HD static float forward(float x) { return std::fabs(x); }
  /// sign(x) dy; sign(+-0) = +0, sign(NaN) = NaN.
  MIXPREC_HD static float backward(float x, float dy) {
    const float s = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;
    return s * dy;
  }
};
struct exp {
  MIXPREC_HD static float forward(float x) { return std::exp(x); }
  MIXPREC_HD static float backward(float y, float dy) { return dy * y; }
};
struct log {
  MIXPREC_HD static float forward(float x) { return std::log(x); }
  MIXPREC_HD static float backward(float x, float dy) { return dy / x; }
};
struct sqrt {
  MIXPREC_HD static float forward(float x) { return std::sqrt(x); }
  MIXPREC_HD static float backward(float y, float dy) { return dy / (2.0f * y); }
};
struct rsqrt {  // a true 1/sqrt, not an approximation
  MIXPREC_HD static float forward(float x) { return 1.0f / std::sqrt(x); }
  /// d x^{-1/2} = -x^{-3/2}/2 = -y^3/2.
  MIXPREC_HD static float backward(float y, float dy) { return dy * (-0.5f * y * y * y); }
};
struct reciprocal {
  MIXPREC_HD static float forward(float x) { return 1.0f / x; }
  MIXPREC_HD static float backward(float y, float dy) { return dy * (-(y * y)); }
};
struct square {
  MIXPREC_HD static float forward(float x) { return x * x; }
  MIXPREC_HD static float backward(float x, float dy) { return dy * (2.0f * x); }
};
struct relu {
  /// x > 0 or NaN keeps x; everything else (including -0) becomes +0.
  MIXPREC_HD static float forward(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
  MIXPREC_HD static float backward(float x, float dy) { return x > 0.0f ? dy : 0.0f; }
};
struct gelu {
  /// x Phi(x) with Phi(x) = erfc(-x/sqrt2)/2: the same function as x/2 (1 + erf(x/sqrt2)),
  /// without the cancellation of 1 + erf for negative x.
  MIXPREC_HD static float forward(float x) { return 0.5f * x * std::erfc(-x * kSqrt1_2); }
  /// Phi(x) + x phi(x); cancels near x = -0.75, so its error is bounded relative to
  /// |dy| (Phi + |x| phi), not to the result.
  MIXPREC_HD static float backward(float x, float dy) {
    const float cdf = 0.5f * std::erfc(-x * kSqrt1_2);
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};
struct tanh {
  MIXPREC_HD static float forward(float x) { return std::tanh(x); }
  MIXPREC_HD static float backward(float y, float dy) { return dy * (1.0f - y * y); }
};
struct sigmoid {
  MIXPREC_HD static float forward(float x) { return 1.0f / (1.0f + std::exp(-x)); }
  MIXPREC_HD static float backward(float y, float dy) { return dy * (y * (1.0f - y)); }
};
struct gelu_tanh {
  /// 0.5 x (1 + tanh(w/2)) = x / (1 + e^-w): no cancellation of 1 + tanh for negative x.
  MIXPREC_HD static float forward(float x) {
    const float w = x * (kGeluTanhC1 + kGeluTanhC2 * (x * x));
    return x / (1.0f + std::exp(-w));
  }
  /// d/dx x s(w) = s + x s (1 - s) w' = s (1 + x w' e s), e = e^-w, s = 1 / (1 + e) (1 - s =
  /// e s without the cancellation of 1 - s). Cancels near x = -0.75 like gelu's.
  MIXPREC_HD static float backward(float x, float dy) {
    const float x2 = x * x;
    const float w = x * (kGeluTanhC1 + kGeluTanhC2 * x2);
    const float wp = kGeluTanhC1 + kGeluTanhC3 * x2;
    const float e = std::exp(-w);
    const float s = 1.0f / (1.0f + e);
    const float g = s * (1.0f + (x * wp) * (e * s));
    return dy * (x > kGeluTanhGradEdge ? 1.0f : x < -kGeluTanhGradEdge ? 0.0f : g);
  }
};
struct silu {
  /// x sigmoid(x), with the sigmoid from e = e^-|x| (never overflows): s = 1/(1 + e) for
  /// x >= 0, e/(1 + e) below, so the result stays accurate down to the subnormals (x / (1 +
  /// e^-x) would give -0 below -88.72). silu(-Inf) = -Inf * 0 = NaN, as PyTorch's x * sigmoid(x).
  MIXPREC_HD static float forward(float x) {
    const float e = std::exp(-std::fabs(x));
    const float r = 1.0f / (1.0f + e);
    return x * (x >= 0.0f ? r : e * r);
  }
  /// d/dx x s = s (1 + x (1 - s)), 1 - s = e r above 0 and r below (no cancellation in 1 - s);
  /// the sum cancels near x = -1.28, so its error is bounded relative to |dy| (s + |x| s (1-s)).
  MIXPREC_HD static float backward(float x, float dy) {
    const float e = std::exp(-std::fabs(x));
    const float r = 1.0f / (1.0f + e);
    const float er = e * r;
    const bool pos = x >= 0.0f;
    return dy * ((pos ? r : er) * (1.0f + x * (pos ? er : r)));
  }
};

// ------------------------------------------------------------------ binary ops

struct add {
  MIXPREC_HD static float apply(float a, float b) { return a + b; }
};
struct sub {
  MIXPREC_HD static float apply(float a, float b) { return a - b; }
};
struct mul {
  MIXPREC_HD static float apply(float a, float b) { return a * b; }
};
struct div {
  MIXPREC_HD static float apply(float a, float b) { return a / b; }
};
struct maximum {
  MIXPREC_HD static float apply(float a, float b) { return kernels::nan_max(a, b); }
};
struct minimum {
  MIXPREC_HD static float apply(float a, float b) { return kernels::nan_min(a, b); }
};
struct pow {
  MIXPREC_HD static float apply(float a, float b) { return std::pow(a, b); }
};
/// Comparisons are false for NaN, so a NaN operand gives 0.
struct eq {
  MIXPREC_HD static float apply(float a, float b) { return a == b ? 1.0f : 0.0f; }
};
struct ge {
  MIXPREC_HD static float apply(float a, float b) { return a >= b ? 1.0f : 0.0f; }
};

}  // namespace mixprec::kernels::math
