// Per-target load/store helpers of the norm and pooling Highway kernels: f32, bf16 and f16
// storage read as f32 lanes (exact), f32 lanes written back rounded once, ties to even, bit for
// bit like half.h's scalar f32_to_bf16_bits / f32_to_f16_bits (NaN stays a quiet NaN, overflow
// becomes Inf, f16 subnormals round like the scalar code), and partial loads/stores for the tail
// of a row (Highway 1.0.3 has no LoadN/StoreN: the tail goes through a zeroed lane buffer).
//
// Why our own conversions: in Highway 1.0.3 DemoteTo(bf16) truncates on some targets, and the
// SSE4/scalar PromoteTo(f16) turns Inf and NaN into finite values (it rebiases exponent 31 like
// any other); the F16C instructions the AVX2/AVX3 targets use are exact, so those keep them.
//
// Included inside each *_simd.cpp's per-target pass (after hwy/highway.h), hence the toggling
// include guard that Highway's own -inl headers use.
#if defined(MIXPREC_KERNELS_CPU_F32_IO_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MIXPREC_KERNELS_CPU_F32_IO_INL_H_
#undef MIXPREC_KERNELS_CPU_F32_IO_INL_H_
#else
#define MIXPREC_KERNELS_CPU_F32_IO_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "mixprec/core/half.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace io {
namespace hn = hwy::HWY_NAMESPACE;

/// Most f32 lanes a vector of this target can hold: the size of the tail buffers.
inline constexpr std::size_t kMaxF32Lanes = HWY_MAX_BYTES / sizeof(float);

/// The storage bits of N elements, one per u32 lane (16-bit patterns zero-extended).
template <class DU>
hn::Vec<DU> LoadBits(DU du, const float* p) {
  return hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
}
template <class DU, class T16>
hn::Vec<DU> LoadBits(DU du, const T16* p) {
  static_assert(sizeof(T16) == 2);
  const hn::Rebind<std::uint16_t, DU> d16;
  return hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const std::uint16_t*>(p)));
}

/// f16 bit patterns (u32 lanes) to f32, exactly as f16_bits_to_f32 (NaN quieted, sign kept).
template <class DF>
hn::Vec<DF> F16BitsToF32(DF df, hn::Vec<hn::RebindToUnsigned<DF>> h) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto e = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1fu));
  const auto m = hn::And(h, hn::Set(du, 0x3ffu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(e, hn::Set(du, 112u))), hn::ShiftLeft<13>(m));
  const auto quiet = hn::IfThenElseZero(hn::Ne(m, hn::Zero(du)), hn::Set(du, 0x00400000u));
  const auto inf_nan = hn::Or(hn::Or(hn::Set(du, 0x7f800000u), quiet), hn::ShiftLeft<13>(m));
  // A subnormal is m * 2^-24: exact in f32 (m < 2^10, scaled by a power of two).
  const auto sub = hn::BitCast(
      du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, m)), hn::Set(df, 0x1p-24f)));
  const auto mag = hn::IfThenElse(hn::Eq(e, hn::Zero(du)), sub,
                                  hn::IfThenElse(hn::Eq(e, hn::Set(du, 0x1fu)), inf_nan, normal));
  return hn::BitCast(df, hn::Or(mag, sign));
}

/// Storage bits (as LoadBits returns them) widened to f32 lanes.
template <class DF>
hn::Vec<DF> WidenBits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits, const float*) {
  return hn::BitCast(df, bits);
}
template <class DF>
hn::Vec<DF> WidenBits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits, const bfloat16*) {
  return hn::BitCast(df, hn::ShiftLeft<16>(bits));
}
template <class DF>
hn::Vec<DF> WidenBits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits, const float16*) {
  return F16BitsToF32(df, bits);
}

/// N elements widened to f32.
template <class DF>
hn::Vec<DF> LoadF32(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
hn::Vec<DF> LoadF32(DF df, const bfloat16* p) {
  const hn::RebindToUnsigned<DF> du;
  return WidenBits(df, LoadBits(du, p), p);
}
template <class DF>
hn::Vec<DF> LoadF32(DF df, const float16* p) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // F16C's vcvtph2ps: exact, and quiets NaN exactly like f16_bits_to_f32.
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#else
  const hn::RebindToUnsigned<DF> du;
  return F16BitsToF32(df, LoadBits(du, p));
#endif
}

/// f32 lanes rounded to bf16 bit patterns in u32 lanes, exactly as f32_to_bf16_bits.
template <class DF>
hn::Vec<hn::RebindToUnsigned<DF>> F32ToBf16Bits(DF df, hn::Vec<DF> v) {
  (void)df;
  const hn::RebindToUnsigned<DF> du;
  const auto x = hn::BitCast(du, v);
  const auto nan = hn::Or(hn::ShiftRight<16>(x), hn::Set(du, 0x40u));
  const auto lsb = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du, 0x7fffu), lsb)));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rounded);
}

/// f32 lanes rounded to f16 bit patterns in u32 lanes, exactly as f32_to_f16_bits.
template <class DF>
hn::Vec<hn::RebindToUnsigned<DF>> F32ToF16Bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const auto x = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  const auto a = hn::And(x, hn::Set(du, 0x7fffffffu));
  const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(a), hn::Set(du, 0x3ffu)));
  // Normal range (|v| >= 2^-14): round the 13 dropped bits to even, rebias 127 -> 15, clamp
  // overflow to Inf. Lanes below the range compute garbage here and are not selected.
  const auto lsb = hn::And(hn::ShiftRight<13>(a), hn::Set(du, 1u));
  const auto biased = hn::Sub(hn::Add(a, hn::Add(hn::Set(du, 0x0fffu), lsb)), hn::Set(du, 112u << 23));
  const auto normal = hn::Min(hn::ShiftRight<13>(biased), hn::Set(du, 0x7c00u));
  // Below 2^-14 the result is a subnormal count of 2^-24 units: adding 0.5 puts the value where
  // an f32 ulp is 2^-24, so the f32 addition itself rounds to even at the f16 quantum.
  const auto mag = hn::Abs(v);
  const auto sub = hn::Sub(hn::BitCast(du, hn::Add(mag, hn::Set(df, 0.5f))), hn::Set(du, 0x3f000000u));
  const auto is_normal = hn::RebindMask(du, hn::Ge(mag, hn::Set(df, 0x1p-14f)));
  const auto r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan,
                                hn::IfThenElse(is_normal, normal, sub));
  return hn::Or(r, sign);
}

/// u32 lanes holding 16-bit patterns stored as N consecutive u16.
template <class DU>
void StoreBits16(DU du, hn::Vec<DU> bits, std::uint16_t* p) {
  (void)du;
  const hn::Rebind<std::uint16_t, DU> d16;
  const hn::RebindToSigned<DU> di;
  // Every lane is <= 0xffff, so the saturating i32 -> u16 demotion keeps it unchanged.
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, p);
}

/// Storage bits (u32 lanes) stored as N elements of the storage type.
template <class DU>
void StoreBits(DU du, hn::Vec<DU> bits, float* p) {
  hn::StoreU(bits, du, reinterpret_cast<std::uint32_t*>(p));
}
template <class DU, class T16>
void StoreBits(DU du, hn::Vec<DU> bits, T16* p) {
  static_assert(sizeof(T16) == 2);
  StoreBits16(du, bits, reinterpret_cast<std::uint16_t*>(p));
}

/// N f32 lanes stored as N elements, each rounded once.
template <class DF>
void StoreF32(DF df, hn::Vec<DF> v, float* p) {
  hn::StoreU(v, df, p);
}
template <class DF>
void StoreF32(DF df, hn::Vec<DF> v, bfloat16* p) {
  StoreBits16(hn::RebindToUnsigned<DF>(), F32ToBf16Bits(df, v), reinterpret_cast<std::uint16_t*>(p));
}
template <class DF>
void StoreF32(DF df, hn::Vec<DF> v, float16* p) {
  StoreBits16(hn::RebindToUnsigned<DF>(), F32ToF16Bits(df, v), reinterpret_cast<std::uint16_t*>(p));
}

/// The first k (< N) elements widened to f32; the other lanes are 0.
template <class DF, class T>
hn::Vec<DF> LoadTail(DF df, const T* p, std::size_t k) {
  T buf[kMaxF32Lanes] = {};
  k = std::min(k, kMaxF32Lanes);  // a no-op that tells the compiler the copy fits
  std::memcpy(static_cast<void*>(buf), p, k * sizeof(T));
  return LoadF32(df, buf);
}

/// Stores the first k (< N) lanes, rounded like Store.
template <class DF, class T>
void StoreTail(DF df, hn::Vec<DF> v, T* p, std::size_t k) {
  T buf[kMaxF32Lanes] = {};
  StoreF32(df, v, buf);
  k = std::min(k, kMaxF32Lanes);
  std::memcpy(static_cast<void*>(p), buf, k * sizeof(T));
}

/// k (1..N) elements: a full vector when k == N, else through the tail buffer.
template <class DF, class T>
hn::Vec<DF> LoadK(DF df, const T* p, std::size_t k) {
  return k == hn::Lanes(df) ? LoadF32(df, p) : LoadTail(df, p, k);
}
template <class DF, class T>
void StoreK(DF df, hn::Vec<DF> v, T* p, std::size_t k) {
  if (k == hn::Lanes(df)) {
    StoreF32(df, v, p);
  } else {
    StoreTail(df, v, p, k);
  }
}

/// Calls f(type_tag) with a null pointer of the storage type named by a DType code
/// (0 f32, 1 bf16, 2 f16), so kernels are instantiated per dtype and chosen once per call.
template <class F>
HWY_INLINE void WithType(int code, F&& f) {
  switch (code) {
    case 0: f(static_cast<float*>(nullptr)); break;
    case 1: f(static_cast<bfloat16*>(nullptr)); break;
    default: f(static_cast<float16*>(nullptr)); break;
  }
}

}  // namespace io
}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // MIXPREC_KERNELS_CPU_F32_IO_INL_H_
