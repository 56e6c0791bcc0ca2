// Per-target vector building blocks for the Highway elementwise kernels (and any other kernel
// that needs them): NaN-propagating max/min with the reference's choices (spec/nan_minmax.h)
// and f32 transcendental functions. Dtype loads/stores come from convert-inl.h.
//
// Transcendentals: exp, log and tanh are Highway's contrib math (hwy/contrib/math/math-inl.h)
// with the special values the contrib code leaves undefined patched to the C library's
// answers (NaN in -> NaN out, exp overflow -> +Inf, log(0) = -Inf, log(x<0) = NaN,
// log(+Inf) = +Inf). erfc (for the exact-erf GELU) and sigmoid are written here. The measured
// accuracy of every function on every target is the table in kernels/elementwise.h; the test
// ElementwiseVecMath.AccuracyAgainstDoublePrecision re-measures it on every target.
//
// Include this header AFTER hwy/highway.h from a file that uses foreach_target.h; the guard
// below is Highway's per-target toggle (the header is re-read once per target).
#if defined(MIXPREC_KERNELS_CPU_VECMATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MIXPREC_KERNELS_CPU_VECMATH_INL_H_
#undef MIXPREC_KERNELS_CPU_VECMATH_INL_H_
#else
#define MIXPREC_KERNELS_CPU_VECMATH_INL_H_
#endif

#include <cmath>
#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/spec/elementwise_math.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {


// ------------------------------------------------------------------ exact helpers

/// The reference's nan_max: NaN a -> a, else NaN b -> b, else a > b ? a : b (tie -> b).
template <class V>
HWY_INLINE V NanMax(V a, V b) {
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::Gt(a, b), a, b));
}
/// The reference's nan_min: NaN a -> a, else NaN b -> b, else a < b ? a : b (tie -> b).
template <class V>
HWY_INLINE V NanMin(V a, V b) {
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::Lt(a, b), a, b));
}

/// The rounding error of a*a: a*a - hi exactly, for hi = fl(a*a) and |a| <= 2^60. With a fused
/// multiply-add that is one MulSub; without one (SSE4, the scalar target) Dekker's product:
/// a is split into two 12-bit halves whose products are exact. Correct only while the
/// compiler does not contract a*b+c itself (the library builds with -ffp-contract=off).
template <class D, class V>
HWY_INLINE V SquareLo(D d, V a, V hi) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulSub(a, a, hi);
#else
  const V c = hn::Mul(a, hn::Set(d, 4097.0f));
  const V ah = hn::Sub(c, hn::Sub(c, a));
  const V al = hn::Sub(a, ah);
  const V t = hn::Add(hn::Sub(hn::Mul(ah, ah), hi), hn::Mul(hn::Add(ah, ah), al));
  return hn::Add(t, hn::Mul(al, al));
#endif
}

/// The NaN the platform's invalid operations produce (x86: the negative default NaN
/// 0xffc00000, Arm: 0x7fc00000), which is what the C library returns for log(x < 0).
template <class D>
HWY_INLINE hn::Vec<D> DefaultNaN(D d) {
#if HWY_ARCH_X86
  constexpr std::int32_t kBits = static_cast<std::int32_t>(0xffc00000u);
#else
  constexpr std::int32_t kBits = 0x7fc00000;
#endif
  return hn::BitCast(d, hn::Set(hn::RebindToSigned<D>(), kBits));
}

/// NaN lanes of x pass through quieted (x + x), as the C library's functions do.
template <class V>
HWY_INLINE V KeepNaN(V x, V result) {
  return hn::IfThenElse(hn::IsNaN(x), hn::Add(x, x), result);
}

// ------------------------------------------------------------------ transcendentals

/// e^x: contrib Exp, plus +Inf above the overflow threshold (the largest float whose exp is
/// finite is 88.7228317...) and NaN propagation; exp(-Inf) = 0 (contrib: 0 below -104).
template <class D, class V>
HWY_INLINE V ExpF(D d, V x) {
  V y = hn::Exp(d, x);
  y = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283172607421875f)), hn::Set(d, HUGE_VALF), y);
  return KeepNaN(x, y);
}

/// ln x: contrib Log with the special values of the C library.
template <class D, class V>
HWY_INLINE V LogF(D d, V x) {
  const V zero = hn::Zero(d);
  const V inf = hn::Set(d, HUGE_VALF);
  V y = hn::Log(d, x);
  y = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(inf), y);
  y = hn::IfThenElse(hn::Lt(x, zero), DefaultNaN(d), y);
  y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
  return KeepNaN(x, y);
}

/// tanh x: contrib Tanh (exact +-1 beyond 18.7, -0 kept) with NaN propagation.
template <class D, class V>
HWY_INLINE V TanhF(D d, V x) {
  return KeepNaN(x, hn::Tanh(d, x));
}

/// 1 / (1 + e^-x), the reference's formula with the vector exp (so it also gives 0 where e^-x
/// overflows, x < -88.72, and exactly 1 for x > 17).
template <class D, class V>
HWY_INLINE V SigmoidF(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, ExpF(d, hn::Neg(x))));
}

/// erfc x, accurate relative to its value also where erfc is tiny (GELU's negative tail).
/// a = |x|. For a < 0.5: 1 - a P(a^2), P a degree-4 fit of erf(a)/a. Else
/// erfc(a) = e^{-a^2} S(t) / (a + 2), t = (a - 2)/(a + 2), S a degree-9 Chebyshev fit of
/// erfc(a) e^{a^2} (a + 2) on [0.5, 10.2] (relative error 4e-9; S stays in [0.6, 1.6], so its
/// rounding is relative to its size). a^2 = hi + lo exactly (SquareLo) and
/// e^{-a^2} = e^{-hi} (1 - lo), so the exponent loses nothing. Beyond a = 10.2, e^{-a^2}
/// underflows to 0 anyway (the clamp also keeps Inf out). x < 0: erfc(x) = 2 - erfc(-x).
template <class D, class V>
HWY_INLINE V ErfcF(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V two = hn::Set(d, 2.0f);
  const V a = hn::Abs(x);
  const V u = hn::Mul(a, a);
  V p = hn::Set(d, 4.699867395e-03f);
  p = hn::MulAdd(p, u, hn::Set(d, -2.674914541e-02f));
  p = hn::MulAdd(p, u, hn::Set(d, 1.128271388e-01f));
  p = hn::MulAdd(p, u, hn::Set(d, -3.761260400e-01f));
  p = hn::MulAdd(p, u, hn::Set(d, 1.128379165e+00f));
  const V small = hn::NegMulAdd(a, p, one);

  const V ac = hn::Min(a, hn::Set(d, 10.2f));
  const V s = hn::Add(ac, two);
  const V t = hn::Div(hn::Sub(ac, two), s);
  V r = hn::Set(d, 1.029530540e-04f);
  r = hn::MulAdd(r, t, hn::Set(d, -5.377045600e-04f));
  r = hn::MulAdd(r, t, hn::Set(d, -8.799600182e-04f));
  r = hn::MulAdd(r, t, hn::Set(d, 3.049493534e-03f));
  r = hn::MulAdd(r, t, hn::Set(d, 6.489442196e-03f));
  r = hn::MulAdd(r, t, hn::Set(d, -2.150498144e-02f));
  r = hn::MulAdd(r, t, hn::Set(d, -3.644317016e-02f));
  r = hn::MulAdd(r, t, hn::Set(d, 2.794718146e-01f));
  r = hn::MulAdd(r, t, hn::Set(d, -6.871606708e-01f));
  r = hn::MulAdd(r, t, hn::Set(d, 1.021582723e+00f));
  const V hi = hn::Mul(ac, ac);
  const V lo = SquareLo(d, ac, hi);
  const V ex = hn::Mul(ExpF(d, hn::Neg(hi)), hn::Sub(one, lo));
  const V big = hn::Mul(ex, hn::Div(r, s));

  V res = hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.5f)), small, big);
  res = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Sub(two, res), res);
  return KeepNaN(x, res);
}

using math::kInvSqrt2Pi;
using math::kSqrt1_2;
using math::kGeluTanhC1;
using math::kGeluTanhC2;
using math::kGeluTanhC3;
using math::kGeluTanhGradEdge;

/// Exact GELU in the reference's operation order: (0.5 x) erfc(-x / sqrt2).
template <class D, class V>
HWY_INLINE V GeluF(D d, V x) {
  const V z = hn::Mul(hn::Neg(x), hn::Set(d, kSqrt1_2));
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), ErfcF(d, z));
}

/// GELU'(x) dy = (Phi(x) + x phi(x)) dy, in the reference's operation order.
template <class D, class V>
HWY_INLINE V GeluGradF(D d, V x, V dy) {
  const V cdf = hn::Mul(hn::Set(d, 0.5f), ErfcF(d, hn::Mul(hn::Neg(x), hn::Set(d, kSqrt1_2))));
  const V e = ExpF(d, hn::Mul(hn::Mul(hn::Set(d, -0.5f), x), x));
  const V pdf = hn::Mul(hn::Set(d, kInvSqrt2Pi), e);
  return hn::Mul(dy, hn::Add(cdf, hn::Mul(x, pdf)));
}

/// w = x (c1 + c2 x^2): separate multiplies and adds (no MulAdd) so that w has the reference's
/// bits on every target; only the exp differs.
template <class D, class V>
HWY_INLINE V GeluTanhArg(D d, V x, V x2) {
  return hn::Mul(x, hn::Add(hn::Set(d, kGeluTanhC1), hn::Mul(hn::Set(d, kGeluTanhC2), x2)));
}

/// Tanh-approximated GELU in the reference's operation order: x / (1 + e^-w).
template <class D, class V>
HWY_INLINE V GeluTanhF(D d, V x) {
  const V w = GeluTanhArg(d, x, hn::Mul(x, x));
  return hn::Div(x, hn::Add(hn::Set(d, 1.0f), ExpF(d, hn::Neg(w))));
}

/// gelu_tanh'(x) dy = s (1 + x w' e s) dy in the reference's operation order; 1 above x = 10,
/// 0 below -10 (selected, so the Inf * 0 lanes computed there never reach the result).
template <class D, class V>
HWY_INLINE V GeluTanhGradF(D d, V x, V dy) {
  const V one = hn::Set(d, 1.0f);
  const V x2 = hn::Mul(x, x);
  const V w = GeluTanhArg(d, x, x2);
  const V wp = hn::Add(hn::Set(d, kGeluTanhC1), hn::Mul(hn::Set(d, kGeluTanhC3), x2));
  const V e = ExpF(d, hn::Neg(w));
  const V s = hn::Div(one, hn::Add(one, e));
  V g = hn::Mul(s, hn::Add(one, hn::Mul(hn::Mul(x, wp), hn::Mul(e, s))));
  g = hn::IfThenElse(hn::Gt(x, hn::Set(d, kGeluTanhGradEdge)), one, g);
  g = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -kGeluTanhGradEdge)), g);
  return hn::Mul(dy, g);
}

/// silu: x s with s from e = e^-|x| as kernels::math::silu, operation for operation.
template <class D, class V>
HWY_INLINE V SiluF(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V e = ExpF(d, hn::Neg(hn::Abs(x)));
  const V r = hn::Div(one, hn::Add(one, e));
  return hn::Mul(x, hn::IfThenElse(hn::Ge(x, hn::Zero(d)), r, hn::Mul(e, r)));
}

/// silu'(x) dy = s (1 + x (1 - s)) dy as kernels::math::silu::backward.
template <class D, class V>
HWY_INLINE V SiluGradF(D d, V x, V dy) {
  const V one = hn::Set(d, 1.0f);
  const V e = ExpF(d, hn::Neg(hn::Abs(x)));
  const V r = hn::Div(one, hn::Add(one, e));
  const V er = hn::Mul(e, r);
  const auto pos = hn::Ge(x, hn::Zero(d));
  const V s = hn::IfThenElse(pos, r, er);
  const V oms = hn::IfThenElse(pos, er, r);
  return hn::Mul(dy, hn::Mul(s, hn::Add(one, hn::Mul(x, oms))));
}

/// std::pow lane by lane (Highway 1.0.3 has no vector pow): bit-identical to the reference.
template <class D, class V>
HWY_INLINE V PowPerLane(D d, V a, V b) {
  HWY_ALIGN float av[HWY_MAX_BYTES / sizeof(float)];
  HWY_ALIGN float bv[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(a, d, av);
  hn::Store(b, d, bv);
  for (std::size_t i = 0; i < hn::Lanes(d); ++i) av[i] = std::pow(av[i], bv[i]);
  return hn::Load(d, av);
}

// ------------------------------------------------------------------ the ops, as vectors

/// One struct per op of mixprec/core/op_list.h, named as in kernels::math (elementwise_math.h):
/// forward(d, x), backward(d, v, dy) with v as the list's `reads` column says, apply(d, a, b).
/// Each repeats the reference's IEEE operations in its order; only the transcendental
/// functions (ExpF, LogF, TanhF, ErfcF) differ, within the list's ulp bounds.
namespace vec {
#define MIXPREC_VEC_UNARY(op, fwd, bwd)                                       \
  struct op {                                                                 \
    template <class D, class V>                                               \
    HWY_INLINE static V forward(D d, V x) { (void)d; return fwd; }            \
    template <class D, class V>                                               \
    HWY_INLINE static V backward(D d, V v, V g) { (void)d; (void)v; return bwd; } \
  };
MIXPREC_VEC_UNARY(neg, hn::Neg(x), hn::Neg(g))
// sign(x) dy with sign(+-0) = +0 and sign(NaN) = NaN
MIXPREC_VEC_UNARY(abs, hn::Abs(x), hn::Mul(hn::IfThenElse(hn::Gt(v, hn::Zero(d)), hn::Set(d, 1.0f),
                          hn::IfThenElse(hn::Lt(v, hn::Zero(d)), hn::Set(d, -1.0f),
                          hn::IfThenElse(hn::Eq(v, hn::Zero(d)), hn::Zero(d), v))), g))
MIXPREC_VEC_UNARY(exp, ExpF(d, x), hn::Mul(g, v))
MIXPREC_VEC_UNARY(log, LogF(d, x), hn::Div(g, v))
// dy / (2 y); 2 y = y + y exactly
MIXPREC_VEC_UNARY(sqrt, hn::Sqrt(x), hn::Div(g, hn::Add(v, v)))
// a true division, not an approximate rsqrt; backward dy * (((-0.5 y) y) y)
MIXPREC_VEC_UNARY(rsqrt, hn::Div(hn::Set(d, 1.0f), hn::Sqrt(x)),
                  hn::Mul(g, hn::Mul(hn::Mul(hn::Mul(hn::Set(d, -0.5f), v), v), v)))
MIXPREC_VEC_UNARY(reciprocal, hn::Div(hn::Set(d, 1.0f), x), hn::Mul(g, hn::Neg(hn::Mul(v, v))))
MIXPREC_VEC_UNARY(square, hn::Mul(x, x), hn::Mul(g, hn::Add(v, v)))
// +0 where x <= 0 (also -0); x where x > 0 or NaN
MIXPREC_VEC_UNARY(relu, hn::IfThenZeroElse(hn::Le(x, hn::Zero(d)), x),
                  hn::IfThenElseZero(hn::Gt(v, hn::Zero(d)), g))
MIXPREC_VEC_UNARY(gelu, GeluF(d, x), GeluGradF(d, v, g))
MIXPREC_VEC_UNARY(tanh, TanhF(d, x), hn::Mul(g, hn::Sub(hn::Set(d, 1.0f), hn::Mul(v, v))))
MIXPREC_VEC_UNARY(sigmoid, SigmoidF(d, x), hn::Mul(g, hn::Mul(v, hn::Sub(hn::Set(d, 1.0f), v))))
MIXPREC_VEC_UNARY(gelu_tanh, GeluTanhF(d, x), GeluTanhGradF(d, v, g))
MIXPREC_VEC_UNARY(silu, SiluF(d, x), SiluGradF(d, v, g))
#undef MIXPREC_VEC_UNARY

#define MIXPREC_VEC_BINARY(op, expr)                                   \
  struct op {                                                          \
    template <class D, class V>                                        \
    HWY_INLINE static V apply(D d, V a, V b) { (void)d; return expr; } \
  };
MIXPREC_VEC_BINARY(add, hn::Add(a, b))
MIXPREC_VEC_BINARY(sub, hn::Sub(a, b))
MIXPREC_VEC_BINARY(mul, hn::Mul(a, b))
MIXPREC_VEC_BINARY(div, hn::Div(a, b))
MIXPREC_VEC_BINARY(maximum, NanMax(a, b))
MIXPREC_VEC_BINARY(minimum, NanMin(a, b))
MIXPREC_VEC_BINARY(pow, PowPerLane(d, a, b))
// Comparisons are false for NaN, so a NaN operand gives 0, as in the reference.
MIXPREC_VEC_BINARY(eq, hn::IfThenElseZero(hn::Eq(a, b), hn::Set(d, 1.0f)))
MIXPREC_VEC_BINARY(ge, hn::IfThenElseZero(hn::Ge(a, b), hn::Set(d, 1.0f)))
#undef MIXPREC_VEC_BINARY
}  // namespace vec

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // MIXPREC_KERNELS_CPU_VECMATH_INL_H_
