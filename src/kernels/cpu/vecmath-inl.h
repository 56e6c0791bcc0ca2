// Per-target vector building blocks for the Highway elementwise kernels (and any other kernel
// that needs them): dtype loads/stores with f32 compute and exactly one round-to-nearest-even
// on store, bit-identical to half.h's f32_to_bf16_bits / f32_to_f16_bits; NaN-propagating
// max/min with the reference's choices (ref/nan_minmax.h); and f32 transcendental functions.
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

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Storage dtype codes: DType's underlying values for the three compute dtypes.
inline constexpr int kF32 = 0;
inline constexpr int kBF16 = 1;
inline constexpr int kF16 = 2;
/// Bytes per element of a dtype code.
constexpr std::size_t ElemBytes(int dt) { return dt == kF32 ? 4 : 2; }

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// ------------------------------------------------------------------ widening loads

/// Lanes(d) 16-bit elements at p (any alignment), zero-extended to 32-bit lanes.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> Load16(D /*d*/, const std::uint16_t* p) {
  const hn::Rebind<std::uint16_t, D> d16;
  const hn::Rebind<std::uint32_t, D> du;
  return hn::BitCast(hn::RebindToSigned<D>(), hn::PromoteTo(du, hn::LoadU(d16, p)));
}

/// bf16 bits (in the low 16 bits of each lane) to f32: a pure shift, exact, NaN payloads kept.
template <class D, class VI>
HWY_INLINE hn::Vec<D> WidenBF16(D d, VI h) {
  return hn::BitCast(d, hn::ShiftLeft<16>(h));
}

/// f16 bits to f32, exactly like half.h's f16_bits_to_f32 (on every target, whatever its
/// hardware converter does): normals and subnormals by an exact multiply by 2^112 of the bits
/// shifted into f32 position, Inf/NaN by bit assembly (a NaN comes out quiet, payload kept).
template <class D, class VI>
HWY_INLINE hn::Vec<D> WidenF16(D d, VI h) {
  const hn::RebindToSigned<D> di;
  const VI sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(di, 0x8000)));
  const VI em = hn::And(h, hn::Set(di, 0x7fff));
  const hn::Vec<D> finite =
      hn::Mul(hn::BitCast(d, hn::ShiftLeft<13>(em)), hn::Set(d, 5.192296858534828e33f));  // 2^112
  const VI mant = hn::And(h, hn::Set(di, 0x3ff));
  const VI quiet = hn::IfThenElseZero(hn::Gt(mant, hn::Zero(di)), hn::Set(di, 0x00400000));
  const VI special = hn::Or(hn::Or(hn::Set(di, 0x7f800000), quiet), hn::ShiftLeft<13>(mant));
  const VI mag = hn::IfThenElse(hn::Gt(em, hn::Set(di, 0x7bff)), special,
                                hn::BitCast(di, finite));
  return hn::BitCast(d, hn::Or(mag, sign));
}

/// Loads Lanes(d) elements of dtype DT from base[i..] as f32 (exact).
template <int DT, class D>
HWY_INLINE hn::Vec<D> LoadAs(D d, const void* base, std::size_t i) {
  if constexpr (DT == kF32) {
    return hn::LoadU(d, static_cast<const float*>(base) + i);
  } else {
    const auto h = Load16(d, static_cast<const std::uint16_t*>(base) + i);
    if constexpr (DT == kBF16) return WidenBF16(d, h);
    else return WidenF16(d, h);
  }
}

// ------------------------------------------------------------------ narrowing stores

/// f32 to bf16 bits (low 16 bits of each lane), bit-identical to f32_to_bf16_bits: RNE on the
/// 16 dropped bits; NaN keeps sign and top payload and gets the quiet bit.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> NarrowBF16(D /*d*/, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto x = hn::BitCast(di, v);
  const auto hi = hn::ShiftRight<16>(hn::BitCast(hn::RebindToUnsigned<D>(), v));
  const auto top = hn::BitCast(di, hi);  // x >> 16 without sign extension
  const auto lsb = hn::And(top, hn::Set(di, 1));
  const auto rounded = hn::BitCast(
      di, hn::ShiftRight<16>(hn::BitCast(hn::RebindToUnsigned<D>(),
                                         hn::Add(hn::Add(x, hn::Set(di, 0x7fff)), lsb))));
  const auto quiet = hn::Or(top, hn::Set(di, 0x40));
  return hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(v)), quiet, rounded);
}

/// f32 to IEEE binary16 bits, bit-identical to f32_to_f16_bits. Normal results: integer RNE on
/// the 13 dropped bits and an exponent rebias, clamped to Inf. Subnormal results (|v| < 2^-14):
/// |v| + 0.5 lands in [0.5, 1), whose ulp is 2^-24 = the f16 subnormal step, so the FPU's own
/// round-to-nearest-even does the rounding; the bits above 0.5 are the f16 subnormal.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> NarrowF16(D d, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto bits = hn::BitCast(di, v);
  const auto x = hn::And(bits, hn::Set(di, 0x7fffffff));
  const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 0x8000));
  const auto m13 = hn::And(hn::ShiftRight<13>(x), hn::Set(di, 1));
  auto normal = hn::Add(hn::Add(x, hn::Set(di, 0x0fff - (112 << 23))), m13);
  normal = hn::Min(hn::ShiftRight<13>(normal), hn::Set(di, 0x7c00));
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(d, x), hn::Set(d, 0.5f))),
                           hn::Set(di, 0x3f000000));
  const auto nan = hn::Or(hn::Set(di, 0x7e00), hn::And(hn::ShiftRight<13>(x), hn::Set(di, 0x3ff)));
  auto h = hn::IfThenElse(hn::Gt(x, hn::Set(di, 0x387fffff)), normal, sub);
  h = hn::IfThenElse(hn::Gt(x, hn::Set(di, 0x7f800000)), nan, h);
  return hn::Or(h, sign);
}

/// Stores Lanes(d) f32 values to base[i..] in dtype DT, rounded once (RNE).
template <int DT, class D>
HWY_INLINE void StoreAs(D d, hn::Vec<D> v, void* base, std::size_t i) {
  if constexpr (DT == kF32) {
    hn::StoreU(v, d, static_cast<float*>(base) + i);
  } else {
    const hn::Rebind<std::uint16_t, D> d16;
    const auto h = DT == kBF16 ? NarrowBF16(d, v) : NarrowF16(d, v);
    // Every lane holds a value in [0, 0xffff], so the saturating demotion is exact.
    hn::StoreU(hn::DemoteTo(d16, h), d16, static_cast<std::uint16_t*>(base) + i);
  }
}

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

/// 1/sqrt(2) and 1/sqrt(2 pi), as the reference spells them.
inline constexpr float kSqrt1_2 = 0.70710678118654752f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;

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

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // MIXPREC_KERNELS_CPU_VECMATH_INL_H_
