// The one per-target (Highway) header for moving f32, bf16, f16 and fp8 storage in and out of
// f32 vectors, used by every CPU kernel family, so each conversion exists once. Widening is
// exact and narrowing rounds to nearest even, bit-identical to f32_to_bf16_bits /
// f32_to_f16_bits / f16_bits_to_f32 of mixprec/core/half.h (and float8.h, and the stochastic
// rules of convert.h) on every target.
//
// Why integer lane arithmetic: Highway 1.0.3's own conversions are not exact everywhere. Its
// DemoteTo to bf16 truncates (or flushes subnormals) on some targets, and its emulated f16
// PromoteTo (SSE4, SCALAR, EMU128: no F16C) rebiases exponent 31 like any other, turning f16
// Inf/NaN into finite numbers. So bf16, fp8 and the f16 fallback are done with integer tricks
// (plus one exact or correctly rounded IEEE operation where noted). The hardware f16
// converters are exact and match half.h bit for bit (RNE, NaN quieted with its payload), so
// f16 uses them where they exist: F16C (x86 AVX2 and AVX-512 targets) and AArch64 NEON/SVE.
//
// Include it after "hwy/highway.h" from a file compiled through hwy/foreach_target.h; the
// include guard toggles so that each target gets its own copy (Highway's -inl.h convention).
//
// Memory level (T = float, bfloat16, float16, float8_e4m3, float8_e5m2):
//   LoadF32(d, p)                  Lanes(d) elements of p as f32
//   StoreF32(d, v, p)              v rounded to p's dtype, Lanes(d) elements
//   LoadF32N(d, p, count[, fill])  the first count <= Lanes(d) elements; other lanes 0 (or fill)
//   StoreF32N(d, v, p, count)      writes only the first count <= Lanes(d) elements
//   LoadF32<DT>(d, base, i) etc.   the same on an untyped buffer of dtype code DT, at element i
// The partial variants never touch memory past p + count: AVX-512 targets use masked loads
// and stores, the others a small stack buffer. d is any Highway tag with float lanes (e.g. hn::ScalableTag<float>).
// Register level (16-bit patterns in u16 lanes, as many as d's f32 lanes):
//   WidenBF16 / WidenF16, NarrowBF16 / NarrowF16, NarrowBF16Stochastic / NarrowF16Stochastic
// Storage-bit level (pooling keeps the winner's exact bits): LoadBits, WidenBits, StoreBits.
// Dtype codes (DType's values): kF32, kBF16, kF16; Storage<DT>, ElemBytes, WithDType.
#if defined(MIXPREC_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MIXPREC_CONVERT_INL_H_
#undef MIXPREC_CONVERT_INL_H_
#else
#define MIXPREC_CONVERT_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

/// f32 bit patterns + 32 random bits per lane -> bf16 bit patterns, as
/// f32_to_bf16_bits_stochastic: the random high half is added to the 16 dropped bits and a
/// carry rounds up (into the exponent up to Inf, as there). NaN as round to nearest even.
template <class DU>
HWY_INLINE hn::Vec<DU> F32ToBf16BitsStochastic(DU du, hn::Vec<DU> x, hn::Vec<DU> random) {
  const hn::RebindToSigned<DU> di;
  const auto abs = hn::BitCast(di, hn::And(x, hn::Set(du, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000)));
  const auto high = hn::ShiftRight<16>(x);
  return hn::IfThenElse(is_nan, hn::Or(high, hn::Set(du, 0x0040u)),
                        hn::ShiftRight<16>(hn::Add(x, hn::ShiftRight<16>(random))));
}

/// A per-lane shift count clamped to [0, 31] (larger counts are not portable).
template <class DU>
HWY_INLINE hn::Vec<DU> ShiftCount(DU du, hn::Vec<hn::RebindToSigned<DU>> count) {
  const hn::RebindToSigned<DU> di;
  return hn::BitCast(du, hn::Min(hn::Max(count, hn::Zero(di)), hn::Set(di, 31)));
}

/// f32 bit patterns + 32 random bits per lane -> f16 bit patterns, as
/// f32_to_f16_bits_stochastic: the magnitude truncated to f16 plus the carry out of
/// random + (dropped fraction of one f16 spacing, as 32 bits). |x| >= 2^16, Inf and NaN round
/// as round to nearest even does (to Inf or a quiet NaN).
template <class DU>
HWY_INLINE hn::Vec<DU> F32ToF16BitsStochastic(DU du, hn::Vec<DU> x, hn::Vec<DU> random) {
  const hn::RebindToSigned<DU> di;
  const auto abs = hn::And(x, hn::Set(du, 0x7fffffffu));
  const auto iabs = hn::BitCast(di, abs);
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  const auto big = hn::RebindMask(du, hn::Gt(iabs, hn::Set(di, 0x477fffff)));
  const auto is_normal = hn::RebindMask(du, hn::Gt(iabs, hn::Set(di, 0x387fffff)));
  // Normal f16 (|x| >= 2^-14): 13 dropped bits.
  const auto kept_normal = hn::ShiftRight<13>(hn::Sub(abs, hn::Set(du, 112u << 23)));
  const auto fraction_normal = hn::ShiftLeft<19>(abs);  // the low 13 bits, at the top
  // Subnormal f16: the value is m * 2^(e - 150) = (m >> s) units of 2^-24, s = 126 - max(e, 1)
  // in [14, 125]. The dropped part is m << (32 - s) when s <= 32, else m >> (s - 32) (zero
  // from s = 56 on, as m < 2^24). Shift counts are clamped to [0, 31] in every lane: lanes of
  // the other paths compute garbage there, but never an out-of-range shift.
  const auto exponent = hn::BitCast(di, hn::ShiftRight<23>(abs));
  const auto has_implicit_bit = hn::RebindMask(du, hn::Gt(exponent, hn::Zero(di)));
  const auto m = hn::Or(hn::And(abs, hn::Set(du, 0x7fffffu)),
                        hn::IfThenElseZero(has_implicit_bit, hn::Set(du, 0x800000u)));
  const auto s = hn::Sub(hn::Set(di, 126), hn::Max(exponent, hn::Set(di, 1)));
  const auto kept_sub = hn::Shr(m, ShiftCount(du, s));  // m >> s; 0 for s >= 24 either way
  const auto left = hn::Shl(m, ShiftCount(du, hn::Sub(hn::Set(di, 32), s)));
  const auto right = hn::Shr(m, ShiftCount(du, hn::Sub(s, hn::Set(di, 32))));
  const auto fraction_sub =
      hn::IfThenElse(hn::RebindMask(du, hn::Lt(s, hn::Set(di, 33))), left, right);
  const auto kept = hn::IfThenElse(is_normal, kept_normal, kept_sub);
  const auto fraction = hn::IfThenElse(is_normal, fraction_normal, fraction_sub);
  // Carry out of random + fraction (bit 31 of the majority of a, b and not-sum).
  const auto sum = hn::Add(random, fraction);
  const auto carry = hn::ShiftRight<31>(hn::Or(hn::And(random, fraction),
                                               hn::AndNot(sum, hn::Or(random, fraction))));
  return hn::IfThenElse(big, F32ToF16Bits(du, x), hn::Or(sign, hn::Add(kept, carry)));
}

}  // namespace cvt

// ---- dtype codes

/// Storage dtype codes: DType's underlying values for the three compute dtypes.
inline constexpr int kF32 = 0;
inline constexpr int kBF16 = 1;
inline constexpr int kF16 = 2;
/// Bytes per element of a dtype code.
constexpr std::size_t ElemBytes(int dt) { return dt == kF32 ? 4 : 2; }
/// The storage type of a dtype code.
template <int DT>
using Storage = std::conditional_t<DT == kF32, float, std::conditional_t<DT == kBF16, bfloat16, float16>>;
/// The storage type named by a WithDType tag.
template <class Tag>
using Elem = Storage<Tag::value>;

/// Calls f(std::integral_constant<int, dt>{}) for a run-time dtype code, so kernels are
/// instantiated per dtype and chosen once per call.
template <class F>
HWY_INLINE void WithDType(int dt, F&& f) {
  switch (dt) {
    case kBF16: f(std::integral_constant<int, kBF16>{}); return;
    case kF16: f(std::integral_constant<int, kF16>{}); return;
    default: f(std::integral_constant<int, kF32>{}); return;
  }
}

/// Most f32 lanes a vector of any target can hold: the size of the tail buffers.
inline constexpr std::size_t kMaxF32Lanes = HWY_MAX_BYTES / sizeof(float);

/// v's f32 lanes combined left to right (r = op(r, lane j), from lane 0): one fixed order, so a
/// target's horizontal sums and maxima are deterministic.
template <class DF, class Op>
HWY_INLINE float FoldLanesInOrder(DF d, hn::Vec<DF> v, Op op) {
  HWY_ALIGN float lanes[kMaxF32Lanes];
  hn::Store(v, d, lanes);
  float r = lanes[0];
  for (std::size_t j = 1; j < hn::Lanes(d); ++j) r = op(r, lanes[j]);
  return r;
}

/// The lane types of the kernels: f32 vectors of the target's full width and their integer views
/// (one definition for every *_simd.cpp that includes this header).
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VU = hn::Vec<DU>;
using DI = hn::RebindToSigned<DF>;
using VI = hn::Vec<DI>;

/// v's lanes summed left to right: FoldLanesInOrder with +, deterministic per target.
HWY_INLINE float SumLanesInOrder(DF d, VF v) {
  return FoldLanesInOrder(d, v, [](float a, float b) { return a + b; });
}

// ---- register level: 16-bit patterns in u16 lanes <-> f32 lanes

// The hardware f16 converters (exact, see the top): F16C on x86 AVX2 / AVX-512, AArch64.
#undef MIXPREC_CVT_NATIVE_F16
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)) || \
    (HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128)
#define MIXPREC_CVT_NATIVE_F16 1
#else
#define MIXPREC_CVT_NATIVE_F16 0
#endif

/// u16 lanes, as many as the f32 lanes of DF.
template <class DF>
using D16 = hn::Rebind<std::uint16_t, DF>;

/// bf16 patterns -> f32 (a 16-bit shift, as bf16_bits_to_f32).
template <class DF>
HWY_INLINE hn::Vec<DF> WidenBF16(DF df, hn::Vec<D16<DF>> bits) {
  return cvt::Bf16BitsToF32(df, hn::PromoteTo(hn::RebindToUnsigned<DF>(), bits));
}

/// f16 patterns -> f32, exactly as f16_bits_to_f32.
template <class DF>
HWY_INLINE hn::Vec<DF> WidenF16(DF df, hn::Vec<D16<DF>> bits) {
#if MIXPREC_CVT_NATIVE_F16
  return hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, DF>(), bits));
#else
  return cvt::F16BitsToF32(df, hn::PromoteTo(hn::RebindToUnsigned<DF>(), bits));
#endif
}

/// f32 -> bf16 patterns, round to nearest even, as f32_to_bf16_bits.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowBF16(DF /*df*/, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  return cvt::NarrowU16(du, cvt::F32ToBf16Bits(du, hn::BitCast(du, v)));
}

/// f32 -> f16 patterns, round to nearest even, as f32_to_f16_bits.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowF16(DF /*df*/, hn::Vec<DF> v) {
#if MIXPREC_CVT_NATIVE_F16
  return hn::BitCast(D16<DF>(), hn::DemoteTo(hn::Rebind<hwy::float16_t, DF>(), v));
#else
  const hn::RebindToUnsigned<DF> du;
  return cvt::NarrowU16(du, cvt::F32ToF16Bits(du, hn::BitCast(du, v)));
#endif
}

/// v rounded to TY's precision and widened back (what a store and a load of v give). bf16
/// stays within each 32-bit lane: F32ToBf16Bits's rounding with the result left in the high
/// half, so no narrowing and widening shuffles (the same bits).
template <class TY, class DF>
HWY_INLINE hn::Vec<DF> RoundTo(DF df, hn::Vec<DF> v) {
  if constexpr (std::is_same_v<TY, bfloat16>) {
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto x = hn::BitCast(du, v);
    const auto abs = hn::And(x, hn::Set(du, 0x7fffffffu));
    const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, abs), hn::Set(di, 0x7f800000)));
    const auto odd = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1u));  // ties to even
    const auto rounded = hn::Add(hn::Add(x, hn::Set(du, 0x7fffu)), odd);
    const auto bits = hn::IfThenElse(is_nan, hn::Or(x, hn::Set(du, 0x00400000u)), rounded);
    return hn::BitCast(df, hn::And(bits, hn::Set(du, 0xffff0000u)));
  }
  else if constexpr (std::is_same_v<TY, float16>) return WidenF16(df, NarrowF16(df, v));
  else return v;
}

/// f32 -> bf16 patterns with stochastic rounding (32 random bits per lane), as
/// f32_to_bf16_bits_stochastic.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowBF16Stochastic(DF /*df*/, hn::Vec<DF> v,
                                                 hn::Vec<hn::RebindToUnsigned<DF>> random) {
  const hn::RebindToUnsigned<DF> du;
  return cvt::NarrowU16(du, cvt::F32ToBf16BitsStochastic(du, hn::BitCast(du, v), random));
}

/// f32 -> f16 patterns with stochastic rounding, as f32_to_f16_bits_stochastic.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> NarrowF16Stochastic(DF /*df*/, hn::Vec<DF> v,
                                                hn::Vec<hn::RebindToUnsigned<DF>> random) {
  const hn::RebindToUnsigned<DF> du;
  return cvt::NarrowU16(du, cvt::F32ToF16BitsStochastic(du, hn::BitCast(du, v), random));
}

// ---- storage-bit level: one element's bits per u32 lane (16-bit patterns zero-extended)

template <class DU>
HWY_INLINE hn::Vec<DU> LoadBits(DU du, const float* HWY_RESTRICT p) {
  return hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
}
template <class DU, class T16, std::enable_if_t<sizeof(T16) == 2, int> = 0>
HWY_INLINE hn::Vec<DU> LoadBits(DU du, const T16* HWY_RESTRICT p) {
  return hn::PromoteTo(du, hn::LoadU(D16<DU>(), reinterpret_cast<const std::uint16_t*>(p)));
}

/// Storage bits (as LoadBits returns them) widened to f32; the pointer only names the dtype.
template <class DF>
HWY_INLINE hn::Vec<DF> WidenBits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits, const float*) {
  return hn::BitCast(df, bits);
}
template <class DF>
HWY_INLINE hn::Vec<DF> WidenBits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits, const bfloat16*) {
  return cvt::Bf16BitsToF32(df, bits);
}
template <class DF>
HWY_INLINE hn::Vec<DF> WidenBits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits, const float16*) {
  return cvt::F16BitsToF32(df, bits);
}

template <class DU>
HWY_INLINE void StoreBits(DU du, hn::Vec<DU> bits, float* HWY_RESTRICT p) {
  hn::StoreU(bits, du, reinterpret_cast<std::uint32_t*>(p));
}
template <class DU, class T16, std::enable_if_t<sizeof(T16) == 2, int> = 0>
HWY_INLINE void StoreBits(DU du, hn::Vec<DU> bits, T16* HWY_RESTRICT p) {
  hn::StoreU(cvt::NarrowU16(du, bits), D16<DU>(), reinterpret_cast<std::uint16_t*>(p));
}

// ---- memory level

template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const bfloat16* HWY_RESTRICT p) {
  return WidenBF16(d, hn::LoadU(D16<D>(), reinterpret_cast<const std::uint16_t*>(p)));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float16* HWY_RESTRICT p) {
  return WidenF16(d, hn::LoadU(D16<D>(), reinterpret_cast<const std::uint16_t*>(p)));
}

template <class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, float* HWY_RESTRICT p) {
  hn::StoreU(v, d, p);
}
template <class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, bfloat16* HWY_RESTRICT p) {
  hn::StoreU(NarrowBF16(d, v), D16<D>(), reinterpret_cast<std::uint16_t*>(p));
}
template <class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, float16* HWY_RESTRICT p) {
  hn::StoreU(NarrowF16(d, v), D16<D>(), reinterpret_cast<std::uint16_t*>(p));
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

/// The first count (<= Lanes(d)) elements of p; the other lanes are zero.
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadF32N(D d, const T* HWY_RESTRICT p, std::size_t count) {
  if (count == hn::Lanes(d)) return LoadF32(d, p);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // AVX-512 masked loads touch only the selected lanes' memory (no fault past p + count) and
  // zero the rest: the buffer below for a fraction of its cost (a short rows' tails were a
  // third of batch norm's time on 14 x 14 planes).
  if constexpr (std::is_same_v<T, float>) {
    return hn::MaskedLoad(hn::FirstN(d, count), d, p);
  } else if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) {
    const D16<D> d16;
    const auto bits =
        hn::MaskedLoad(hn::FirstN(d16, count), d16, reinterpret_cast<const std::uint16_t*>(p));
    if constexpr (std::is_same_v<T, bfloat16>) return WidenBF16(d, bits);
    else return WidenF16(d, bits);
  }
#endif
  HWY_ALIGN T buffer[hn::MaxLanes(D())] = {};
  count = std::min(count, hn::MaxLanes(D()));  // a no-op that tells the compiler the copy fits
  std::memcpy(static_cast<void*>(buffer), p, count * sizeof(T));
  return LoadF32(d, buffer);
}

/// The first count (<= Lanes(d)) elements of p; the other lanes are fill (e.g. the identity
/// of the caller's reduction).
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadF32N(D d, const T* HWY_RESTRICT p, std::size_t count, float fill) {
  if (count == hn::Lanes(d)) return LoadF32(d, p);
  return hn::IfThenElse(hn::FirstN(d, count), LoadF32N(d, p, count), hn::Set(d, fill));
}

/// Stores the first count lanes of v (count <= Lanes(d)), rounded to p's dtype.
template <class D, typename T>
HWY_INLINE void StoreF32N(D d, hn::Vec<D> v, T* HWY_RESTRICT p, std::size_t count) {
  if (count == hn::Lanes(d)) return StoreF32(d, v, p);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // Masked stores write only the selected lanes (see LoadF32N).
  if constexpr (std::is_same_v<T, float>) {
    return hn::BlendedStore(v, hn::FirstN(d, count), d, p);
  } else if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) {
    const D16<D> d16;
    auto* bits_out = reinterpret_cast<std::uint16_t*>(p);
    if constexpr (std::is_same_v<T, bfloat16>) {
      return hn::BlendedStore(NarrowBF16(d, v), hn::FirstN(d16, count), d16, bits_out);
    } else {
      return hn::BlendedStore(NarrowF16(d, v), hn::FirstN(d16, count), d16, bits_out);
    }
  }
#endif
  HWY_ALIGN T buffer[hn::MaxLanes(D())];
  StoreF32(d, v, buffer);
  count = std::min(count, hn::MaxLanes(D()));
  std::memcpy(static_cast<void*>(p), buffer, count * sizeof(T));
}

// ---- the same on untyped buffers of dtype code DT, at element i

template <int DT, class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const void* base, std::size_t i) {
  return LoadF32(d, static_cast<const Storage<DT>*>(base) + i);
}
template <int DT, class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, void* base, std::size_t i) {
  StoreF32(d, v, static_cast<Storage<DT>*>(base) + i);
}
template <int DT, class D>
HWY_INLINE hn::Vec<D> LoadF32N(D d, const void* base, std::size_t i, std::size_t count) {
  return LoadF32N(d, static_cast<const Storage<DT>*>(base) + i, count);
}
template <int DT, class D>
HWY_INLINE hn::Vec<D> LoadF32N(D d, const void* base, std::size_t i, std::size_t count,
                               float fill) {
  return LoadF32N(d, static_cast<const Storage<DT>*>(base) + i, count, fill);
}
template <int DT, class D>
HWY_INLINE void StoreF32N(D d, hn::Vec<D> v, void* base, std::size_t i, std::size_t count) {
  StoreF32N(d, v, static_cast<Storage<DT>*>(base) + i, count);
}
/// Element i of a dtype-DT buffer as f32 (exact), for scalar loops.
template <int DT>
HWY_INLINE float LoadScalar(const void* base, std::size_t i) {
  return static_cast<float>(static_cast<const Storage<DT>*>(base)[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // MIXPREC_CONVERT_INL_H_
