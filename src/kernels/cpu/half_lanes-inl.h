// f32 lanes <-> bf16/f16 bit patterns for the Highway kernels of the optimizer and the gradient
// unscale: exact widening, round-to-nearest-even narrowing and stochastic narrowing, each bit for
// bit the scalar rule of mixprec/core/half.h and f32_to_*_bits_stochastic (convert.h) on every
// target. Integer (and exact float) arithmetic only, because Highway 1.0.3's own conversions are
// not exact everywhere: its DemoteTo to bf16 truncates on some targets, and its emulated f16
// PromoteTo (targets without F16C: SSE4, scalar) turns f16 Inf/NaN into finite numbers.
// Per-target header: include it after hwy/highway.h from a *_simd.cpp (re-included per target).

#if defined(MIXPREC_KERNELS_CPU_HALF_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MIXPREC_KERNELS_CPU_HALF_LANES_INL_H_
#undef MIXPREC_KERNELS_CPU_HALF_LANES_INL_H_
#else
#define MIXPREC_KERNELS_CPU_HALF_LANES_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace half_lanes {
namespace hn = hwy::HWY_NAMESPACE;

// x86 targets with F16C (AVX2, AVX-512): vcvtph2ps / vcvtps2ph (round to nearest even) are exact
// and match half.h bit for bit, NaN payloads included; elsewhere the integer code below runs.
#undef MIXPREC_HALF_LANES_F16C
#if (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && \
    !defined(HWY_DISABLE_F16C)
#define MIXPREC_HALF_LANES_F16C 1
#else
#define MIXPREC_HALF_LANES_F16C 0
#endif

/// Lanes of unsigned 16-bit patterns, as many as the f32 lanes of DF (half the vector width).
template <class DF>
using D16 = hn::Rebind<std::uint16_t, DF>;

/// bf16 patterns -> f32 (a 16-bit shift, as bf16_bits_to_f32).
template <class DF>
HWY_INLINE hn::Vec<DF> WidenBF16(DF df, hn::Vec<D16<DF>> bits) {
  const hn::RebindToUnsigned<DF> du;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, bits)));
}

/// f16 patterns -> f32, exactly as f16_bits_to_f32 (subnormals normalised, NaN quietened).
template <class DF>
HWY_INLINE hn::Vec<DF> WidenF16(DF df, hn::Vec<D16<DF>> bits) {
#if MIXPREC_HALF_LANES_F16C
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::BitCast(dh, bits));
#else
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto h = hn::PromoteTo(du, bits);
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1fu));
  const auto mant = hn::And(h, hn::Set(du, 0x3ffu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))),
                             hn::ShiftLeft<13>(mant));
  // Inf/NaN: all-ones exponent; a NaN also gets the f32 quiet bit.
  const auto mant_zero = hn::RebindMask(du, hn::Eq(hn::BitCast(di, mant), hn::Zero(di)));
  const auto special = hn::Or(hn::Or(hn::Set(du, 0x7f800000u), hn::ShiftLeft<13>(mant)),
                              hn::IfThenZeroElse(mant_zero, hn::Set(du, 0x00400000u)));
  // Subnormal or zero: mant * 2^-24, both conversions and the scaling exact.
  const auto sub = hn::BitCast(
      du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mant)), hn::Set(df, 0x1p-24f)));
  const auto exp_i = hn::BitCast(di, exp);
  auto r = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp_i, hn::Zero(di))), sub, normal);
  r = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp_i, hn::Set(di, 0x1f))), special, r);
  return hn::BitCast(df, hn::Or(sign, r));
#endif
}

/// 32-bit lanes holding values < 2^16 -> 16-bit lanes (exact: the saturation never applies).
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> Pack16(DF df, hn::Vec<hn::RebindToUnsigned<DF>> v) {
  (void)df;
  const hn::RebindToSigned<DF> di;
  return hn::DemoteTo(D16<DF>(), hn::BitCast(di, v));
}

/// The NaN lanes of f32 patterns (magnitude above the Inf pattern), as a mask of unsigned lanes.
template <class DU>
HWY_INLINE hn::Mask<DU> NaNLanes(DU du, hn::Vec<DU> x) {
  const hn::RebindToSigned<DU> di;
  const auto magnitude = hn::BitCast(di, hn::And(x, hn::Set(du, 0x7fffffffu)));
  return hn::RebindMask(du, hn::Gt(magnitude, hn::Set(di, 0x7f800000)));
}

/// f32 -> bf16 patterns, round to nearest even, as f32_to_bf16_bits: add 0x7fff plus the kept
/// lsb and truncate; a NaN keeps its top bits and gets the quiet bit.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowBF16(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const auto x = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1u));
  const auto rounded = hn::Add(x, hn::Add(lsb, hn::Set(du, 0x7fffu)));
  const auto quiet = hn::Or(x, hn::Set(du, 0x00400000u));
  return Pack16(df, hn::ShiftRight<16>(hn::IfThenElse(NaNLanes(du, x), quiet, rounded)));
}

/// f32 -> bf16 patterns with stochastic rounding, as f32_to_bf16_bits_stochastic: add the top 16
/// random bits below the kept bits and truncate (a carry into the exponent gives Inf, as there).
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowBF16Stochastic(DF df, hn::Vec<DF> v,
                                                 hn::Vec<hn::RebindToUnsigned<DF>> random) {
  const hn::RebindToUnsigned<DF> du;
  const auto x = hn::BitCast(du, v);
  const auto sum = hn::Add(x, hn::ShiftRight<16>(random));
  const auto quiet = hn::Or(x, hn::Set(du, 0x00400000u));
  return Pack16(df, hn::ShiftRight<16>(hn::IfThenElse(NaNLanes(du, x), quiet, sum)));
}

/// f32 -> f16 patterns, round to nearest even, as f32_to_f16_bits.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowF16(DF df, hn::Vec<DF> v) {
#if MIXPREC_HALF_LANES_F16C
  (void)df;
  return hn::BitCast(D16<DF>(), hn::DemoteTo(hn::Rebind<hwy::float16_t, DF>(), v));
#else
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto x = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  const auto a = hn::And(x, hn::Set(du, 0x7fffffffu));
  // Normal f16 (|v| >= 2^-14) or overflow: round the 13 dropped bits, rebias 127 -> 15, clamp
  // at Inf (0x7c00).
  const auto lsb = hn::And(hn::ShiftRight<13>(a), hn::Set(du, 1u));
  const auto biased = hn::Sub(hn::Add(a, hn::Add(lsb, hn::Set(du, 0x0fffu))),
                              hn::Set(du, 112u << 23));
  const auto normal = hn::Min(hn::ShiftRight<13>(biased), hn::Set(du, 0x7c00u));
  // Subnormal f16 (or zero): adding 0.5 puts |v| in units of 2^-24 (the spacing of f32 in
  // [0.5, 1)) into the low mantissa bits, rounded to nearest even by the IEEE addition itself;
  // a value that rounds up to 2^-14 gives 0x400, the smallest normal f16, as the scalar code.
  // |v| <= 2^-25 (f32 subnormals included) gives 0, also as the scalar code.
  const auto sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, a), hn::Set(df, 0.5f))),
                           hn::Set(du, 0x3f000000u));
  const auto is_normal =
      hn::RebindMask(du, hn::Gt(hn::BitCast(di, a), hn::Set(di, 0x38800000 - 1)));
  auto h = hn::IfThenElse(is_normal, normal, sub);
  const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(a), hn::Set(du, 0x3ffu)));
  h = hn::IfThenElse(NaNLanes(du, x), nan, h);
  return Pack16(df, hn::Or(sign, h));
#endif
}

/// f32 -> f16 patterns with stochastic rounding, as f32_to_f16_bits_stochastic: truncate the
/// magnitude to f16 and add 1 iff random + floor(dropped fraction of one f16 spacing * 2^32)
/// carries out of 32 bits.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowF16Stochastic(DF df, hn::Vec<DF> v,
                                                hn::Vec<hn::RebindToUnsigned<DF>> random) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto x = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  const auto a = hn::And(x, hn::Set(du, 0x7fffffffu));
  const auto ai = hn::BitCast(di, a);  // non-negative, so signed compares order magnitudes
  const auto is_normal = hn::Gt(ai, hn::Set(di, 0x38800000 - 1));
  // Normal f16 range (|v| >= 2^-14): 13 dropped bits.
  const auto kept_normal = hn::ShiftRight<13>(hn::Sub(a, hn::Set(du, 112u << 23)));
  const auto fraction_normal = hn::ShiftLeft<19>(a);
  // Subnormal f16 range, in exact float arithmetic (no variable shifts, which Highway emulates
  // on some targets and which are undefined past 31 on others): t = |v| * 2^24 is |v| in units
  // of 2^-24 (a power-of-two scaling, exact); its integer part is the kept value and its
  // fraction f = t - floor(t) is exact too; floor(f * 2^32) is assembled from two exact 16-bit
  // steps. This equals the scalar shifts for every f32 input, f32 subnormals included (they
  // give kept 0 and a fraction below 2^-8, i.e. 0). Other lanes compute on 0.
  const auto t = hn::Mul(hn::IfThenZeroElse(hn::RebindMask(df, is_normal), hn::BitCast(df, a)),
                         hn::Set(df, 16777216.0f));
  const auto kept_sub = hn::ConvertTo(di, t);  // truncation = floor (t >= 0, t < 1024)
  const auto f16 = hn::Mul(hn::Sub(t, hn::ConvertTo(df, kept_sub)), hn::Set(df, 65536.0f));
  const auto hi = hn::ConvertTo(di, f16);
  const auto lo = hn::ConvertTo(di, hn::Mul(hn::Sub(f16, hn::ConvertTo(df, hi)), hn::Set(df, 65536.0f)));
  const auto fraction_sub = hn::Or(hn::ShiftLeft<16>(hn::BitCast(du, hi)), hn::BitCast(du, lo));
  const auto normal_u = hn::RebindMask(du, is_normal);
  auto kept = hn::IfThenElse(normal_u, kept_normal, hn::BitCast(du, kept_sub));
  const auto fraction = hn::IfThenElse(normal_u, fraction_normal, fraction_sub);
  // Carry out of random + fraction: the wrapped sum is below random (unsigned compare, done
  // signed on sign-flipped values).
  const auto flip = hn::Set(du, 0x80000000u);
  const auto sum = hn::Add(random, fraction);
  const auto carry = hn::Gt(hn::BitCast(di, hn::Xor(random, flip)), hn::BitCast(di, hn::Xor(sum, flip)));
  kept = hn::Sub(kept, hn::BitCast(du, hn::VecFromMask(di, carry)));  // mask lanes are -1
  // From 2^16 up (Inf included) the result is Inf; NaN as round to nearest even.
  const auto huge = hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x47800000 - 1)));
  kept = hn::IfThenElse(huge, hn::Set(du, 0x7c00u), kept);
  const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(a), hn::Set(du, 0x3ffu)));
  kept = hn::IfThenElse(NaNLanes(du, x), nan, kept);
  return Pack16(df, hn::Or(sign, kept));
}

}  // namespace half_lanes
}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
