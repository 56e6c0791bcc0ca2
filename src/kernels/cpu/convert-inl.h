// Per-target (Highway) loads and stores of f32, bf16 and f16 buffers as f32 vectors, so every
// kernel family can run its vector loop in f32 over any storage dtype. Widening is exact and
// narrowing rounds to nearest even, bit-identical to f32_to_bf16_bits / f32_to_f16_bits /
// f16_bits_to_f32 of mixprec/core/half.h on every target: the rounding is done with integer
// lane arithmetic, never with Highway's DemoteTo to bf16/f16, which in Highway 1.0.3 truncates
// or flushes subnormals on some targets.
//
// Include it after "hwy/highway.h" from a file compiled through hwy/foreach_target.h; the
// include guard toggles so that each target gets its own copy (Highway's -inl.h convention).
//
//   LoadF32(d, p)              Lanes(d) elements of p (float, bfloat16 or float16; also the
//                              fp8 storage types float8_e4m3, float8_e5m2) as f32
//   StoreF32(d, v, p)          v rounded to p's dtype, Lanes(d) elements
//   LoadF32N(d, p, count)      the first count (< Lanes(d) allowed) elements; other lanes 0
//   StoreF32N(d, v, p, count)  writes only the first count elements
// d is any Highway tag with float lanes (e.g. hn::ScalableTag<float>). The partial variants go
// through a small stack buffer, so they never touch memory past p + count.
#if defined(MIXPREC_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MIXPREC_CONVERT_INL_H_
#undef MIXPREC_CONVERT_INL_H_
#else
#define MIXPREC_CONVERT_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/half.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;  // the usual alias; redeclaring it in an includer is fine

namespace cvt {

// ---- bit-level conversions on u32 lanes (one element per lane, 16-bit results in the low half)

/// f32 bit patterns -> bf16 bit patterns: f32_to_bf16_bits lane by lane.
template <class DU>
HWY_INLINE hn::Vec<DU> F32ToBf16Bits(DU du, hn::Vec<DU> x) {
  const hn::RebindToSigned<DU> di;
  const auto abs = hn::And(x, hn::Set(du, 0x7fffffffu));
  const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, abs), hn::Set(di, 0x7f800000)));
  const auto high = hn::ShiftRight<16>(x);
  const auto odd = hn::And(high, hn::Set(du, 1u));  // ties go to the even neighbour
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(x, hn::Set(du, 0x7fffu)), odd));
  return hn::IfThenElse(is_nan, hn::Or(high, hn::Set(du, 0x0040u)), rounded);
}

/// bf16 bit patterns (low half of each lane) -> f32 values: a shift, as bf16_bits_to_f32.
template <class DF, class DU = hn::RebindToUnsigned<DF>>
HWY_INLINE hn::Vec<DF> Bf16BitsToF32(DF df, hn::Vec<DU> h) {
  return hn::BitCast(df, hn::ShiftLeft<16>(h));
}

/// f32 bit patterns -> f16 bit patterns: f32_to_f16_bits lane by lane. Normal results round
/// with the integer trick; subnormal results come from adding 0.5f, whose spacing 2^-24 is the
/// f16 subnormal step, so the FPU's own round-to-nearest-even does the rounding exactly. (Also
/// right under flush-to-zero / denormals-are-zero: the operands that matter, |x| >= 2^-25, and
/// the sum are normal f32; an f32 denormal rounds to zero either way.)
template <class DU>
HWY_INLINE hn::Vec<DU> F32ToF16Bits(DU du, hn::Vec<DU> x) {
  const hn::RebindToSigned<DU> di;
  const hn::RebindToFloat<DU> df;
  const auto abs = hn::And(x, hn::Set(du, 0x7fffffffu));
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  const auto iabs = hn::BitCast(di, abs);  // < 2^31: signed compares are exact
  const auto is_nan = hn::RebindMask(du, hn::Gt(iabs, hn::Set(di, 0x7f800000)));
  const auto is_normal = hn::RebindMask(du, hn::Gt(iabs, hn::Set(di, 0x387fffff)));
  // Normal (or overflow): round the 13 dropped bits half to even, rebias 127 -> 15, clamp to Inf.
  const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
  const auto biased = hn::Sub(hn::Add(hn::Add(abs, hn::Set(du, 0x0fffu)), odd),
                              hn::Set(du, 112u << 23));
  const auto normal = hn::BitCast(
      du, hn::Min(hn::BitCast(di, hn::ShiftRight<13>(biased)), hn::Set(di, 0x7c00)));
  // Subnormal or zero: 0.5 + |x| rounds |x| to a multiple of 2^-24 (|x| < 2^-14, so the sum
  // stays in [0.5, 1)); its low mantissa bits are the count of 2^-24 steps, up to 0x400.
  const auto half = hn::Set(df, 0.5f);
  const auto sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, abs), half)),
                           hn::BitCast(du, half));
  const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 0x3ffu)));
  return hn::Or(sign, hn::IfThenElse(is_nan, nan, hn::IfThenElse(is_normal, normal, sub)));
}

/// f16 bit patterns (low half of each lane) -> f32 values: f16_bits_to_f32 lane by lane
/// (subnormals exact, NaN quiet with its payload).
template <class DF, class DU = hn::RebindToUnsigned<DF>>
HWY_INLINE hn::Vec<DF> F16BitsToF32(DF df, hn::Vec<DU> h) {
  const DU du;
  const hn::RebindToSigned<DF> di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto mag = hn::And(h, hn::Set(du, 0x7fffu));
  const auto imag = hn::BitCast(di, mag);
  const auto is_special = hn::RebindMask(du, hn::Gt(imag, hn::Set(di, 0x7bff)));  // Inf, NaN
  const auto is_subnormal = hn::RebindMask(du, hn::Lt(imag, hn::Set(di, 0x0400)));
  const auto normal = hn::Add(hn::ShiftLeft<13>(mag), hn::Set(du, 112u << 23));
  const auto is_nan = hn::RebindMask(du, hn::Gt(imag, hn::Set(di, 0x7c00)));
  const auto special = hn::Or(hn::Or(hn::ShiftLeft<13>(mag), hn::Set(du, 0x7f800000u)),
                              hn::IfThenElseZero(is_nan, hn::Set(du, 0x00400000u)));
  // mag * 2^-24 is exact in f32 (an integer below 2^10 times a power of two).
  const auto sub = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, imag), hn::Set(df, 0x1p-24f)));
  const auto bits = hn::IfThenElse(is_special, special, hn::IfThenElse(is_subnormal, sub, normal));
  return hn::BitCast(df, hn::Or(sign, bits));
}

/// u32 lanes holding values below 2^16 -> u16 lanes.
template <class DU>
HWY_INLINE hn::Vec<hn::Rebind<std::uint16_t, DU>> NarrowU16(DU /*du*/, hn::Vec<DU> v) {
  const hn::RebindToSigned<DU> di;
  return hn::DemoteTo(hn::Rebind<std::uint16_t, DU>(), hn::BitCast(di, v));  // no saturation
}

/// f32 bit patterns -> fp8 bit patterns of a format with kMant mantissa bits and bias kBias:
/// f32_to_e4m3_bits / f32_to_e5m2_bits of float8.h lane by lane. Subnormal results come from
/// adding the power of two whose f32 spacing is the fp8 subnormal step (FPU rounding to
/// nearest even, as for f16).
template <int kMant, int kBias, bool kHasInf, class DU>
HWY_INLINE hn::Vec<DU> F32ToFp8Bits(DU du, hn::Vec<DU> x) {
  constexpr std::uint32_t kInf = ((1u << (7 - kMant)) - 1u) << kMant;
  constexpr std::uint32_t kNaN = kHasInf ? (kInf | (1u << (kMant - 1))) : 0x7fu;
  constexpr std::int32_t kMaxFinite = kHasInf ? static_cast<std::int32_t>(kInf) - 1 : 0x7e;
  constexpr std::uint32_t kOverflow = kHasInf ? kInf : kNaN;
  constexpr int kDrop = 23 - kMant;
  constexpr std::int32_t kMinNormal = (128 - kBias) << 23;
  constexpr std::uint32_t kMagic = static_cast<std::uint32_t>(127 + 24 - kBias - kMant) << 23;
  const hn::RebindToSigned<DU> di;
  const hn::RebindToFloat<DU> df;
  const auto abs = hn::And(x, hn::Set(du, 0x7fffffffu));
  const auto iabs = hn::BitCast(di, abs);
  const auto sign = hn::And(hn::ShiftRight<24>(x), hn::Set(du, 0x80u));
  const auto is_nan = hn::RebindMask(du, hn::Gt(iabs, hn::Set(di, 0x7f800000)));
  const auto is_normal = hn::RebindMask(du, hn::Gt(iabs, hn::Set(di, kMinNormal - 1)));
  const auto odd = hn::And(hn::ShiftRight<kDrop>(abs), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<kDrop>(
      hn::Add(hn::Add(abs, hn::Set(du, (1u << (kDrop - 1)) - 1u)), odd));
  const auto r = hn::Sub(rounded, hn::Set(du, static_cast<std::uint32_t>(127 - kBias) << kMant));
  const auto overflow = hn::RebindMask(du, hn::Gt(hn::BitCast(di, r), hn::Set(di, kMaxFinite)));
  const auto normal = hn::IfThenElse(overflow, hn::Set(du, kOverflow), r);
  const auto magic = hn::BitCast(df, hn::Set(du, kMagic));
  const auto sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, abs), magic)),
                           hn::Set(du, kMagic));
  return hn::Or(sign, hn::IfThenElse(is_nan, hn::Set(du, kNaN),
                                     hn::IfThenElse(is_normal, normal, sub)));
}

/// E4M3 bit patterns (low byte of each lane) -> f32 values, as e4m3_bits_to_f32.
template <class DF, class DU = hn::RebindToUnsigned<DF>>
HWY_INLINE hn::Vec<DF> E4m3BitsToF32(DF df, hn::Vec<DU> b) {
  const DU du;
  const hn::RebindToSigned<DF> di;
  const auto sign = hn::ShiftLeft<24>(hn::And(b, hn::Set(du, 0x80u)));
  const auto mag = hn::And(b, hn::Set(du, 0x7fu));
  const auto imag = hn::BitCast(di, mag);
  const auto is_nan = hn::RebindMask(du, hn::Eq(imag, hn::Set(di, 0x7f)));
  const auto is_subnormal = hn::RebindMask(du, hn::Lt(imag, hn::Set(di, 0x08)));
  const auto normal = hn::Add(hn::ShiftLeft<20>(mag), hn::Set(du, 120u << 23));
  // mag * 2^-9 is exact in f32.
  const auto sub = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, imag), hn::Set(df, 0x1p-9f)));
  const auto bits = hn::IfThenElse(is_nan, hn::Set(du, 0x7fc00000u),
                                   hn::IfThenElse(is_subnormal, sub, normal));
  return hn::BitCast(df, hn::Or(sign, bits));
}

/// u32 lanes holding values below 2^8 -> u8 lanes.
template <class DU>
HWY_INLINE hn::Vec<hn::Rebind<std::uint8_t, DU>> NarrowU8(DU /*du*/, hn::Vec<DU> v) {
  const hn::RebindToSigned<DU> di;
  return hn::DemoteTo(hn::Rebind<std::uint8_t, DU>(), hn::BitCast(di, v));  // no saturation
}

template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> LoadBytes(D /*d*/, const void* HWY_RESTRICT p) {
  const hn::Rebind<std::uint8_t, D> d8;
  return hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(d8, static_cast<const std::uint8_t*>(p)));
}

}  // namespace cvt

// ---- the public helpers

template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const bfloat16* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint16_t, D> d16;
  const auto* bits = reinterpret_cast<const std::uint16_t*>(p);
  return cvt::Bf16BitsToF32(d, hn::PromoteTo(du, hn::LoadU(d16, bits)));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float16* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint16_t, D> d16;
  const auto* bits = reinterpret_cast<const std::uint16_t*>(p);
  return cvt::F16BitsToF32(d, hn::PromoteTo(du, hn::LoadU(d16, bits)));
}

template <class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, float* HWY_RESTRICT p) {
  hn::StoreU(v, d, p);
}
template <class D>
HWY_INLINE void StoreF32(D /*d*/, hn::Vec<D> v, bfloat16* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint16_t, D> d16;
  hn::StoreU(cvt::NarrowU16(du, cvt::F32ToBf16Bits(du, hn::BitCast(du, v))), d16,
             reinterpret_cast<std::uint16_t*>(p));
}
template <class D>
HWY_INLINE void StoreF32(D /*d*/, hn::Vec<D> v, float16* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint16_t, D> d16;
  hn::StoreU(cvt::NarrowU16(du, cvt::F32ToF16Bits(du, hn::BitCast(du, v))), d16,
             reinterpret_cast<std::uint16_t*>(p));
}

// fp8 (storage only): E5M2 is binary16 without its low 8 mantissa bits.
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float8_e4m3* HWY_RESTRICT p) {
  return cvt::E4m3BitsToF32(d, cvt::LoadBytes(d, p));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float8_e5m2* HWY_RESTRICT p) {
  return cvt::F16BitsToF32(d, hn::ShiftLeft<8>(cvt::LoadBytes(d, p)));
}
template <class D>
HWY_INLINE void StoreF32(D /*d*/, hn::Vec<D> v, float8_e4m3* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint8_t, D> d8;
  hn::StoreU(cvt::NarrowU8(du, cvt::F32ToFp8Bits<3, 7, false>(du, hn::BitCast(du, v))), d8,
             reinterpret_cast<std::uint8_t*>(p));
}
template <class D>
HWY_INLINE void StoreF32(D /*d*/, hn::Vec<D> v, float8_e5m2* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint8_t, D> d8;
  hn::StoreU(cvt::NarrowU8(du, cvt::F32ToFp8Bits<2, 15, true>(du, hn::BitCast(du, v))), d8,
             reinterpret_cast<std::uint8_t*>(p));
}

/// The first count elements of p (count <= Lanes(d)); the other lanes are zero.
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadF32N(D d, const T* HWY_RESTRICT p, std::size_t count) {
  HWY_ALIGN T buffer[hn::MaxLanes(D())] = {};
  std::memcpy(buffer, p, count * sizeof(T));
  return LoadF32(d, buffer);
}

/// Stores the first count lanes of v (count <= Lanes(d)), rounded to p's dtype.
template <class D, typename T>
HWY_INLINE void StoreF32N(D d, hn::Vec<D> v, T* HWY_RESTRICT p, std::size_t count) {
  HWY_ALIGN T buffer[hn::MaxLanes(D())];
  StoreF32(d, v, buffer);
  std::memcpy(p, buffer, count * sizeof(T));
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // MIXPREC_CONVERT_INL_H_
