// f32 <-> storage-dtype vector loads and stores for the reduction and softmax kernels
// (reduce_simd.cpp, softmax_simd.cpp): every element is widened to f32 exactly, computed in f32,
// and narrowed once with round-to-nearest-even, bit for bit like the scalar conversions of
// include/mixprec/core/half.h (which the reference kernels use through T(value)).
// Highway 1.0.3 is not relied on where it differs from half.h: its emulated f16 widening (SSE4,
// scalar) turns Inf/NaN into finite numbers, and its bf16 narrowing truncates on some targets.
// Dtype codes are DType's values: 0 f32, 1 bf16, 2 f16.

// Per-target include guard (the Highway convention for -inl.h files).
#if defined(MIXPREC_KERNELS_CPU_REDUCE_SOFTMAX_IO_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MIXPREC_KERNELS_CPU_REDUCE_SOFTMAX_IO_INL_H_
#undef MIXPREC_KERNELS_CPU_REDUCE_SOFTMAX_IO_INL_H_
#else
#define MIXPREC_KERNELS_CPU_REDUCE_SOFTMAX_IO_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "mixprec/core/half.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// F16C (x86 AVX2 and up) and ARM convert f16 natively with IEEE semantics: exact widening, RNE
// narrowing, NaN quieted with its payload kept: what half.h specifies.
#undef MIXPREC_RSIO_NATIVE_F16
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || \
    (HWY_ARCH_ARM && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128)
#define MIXPREC_RSIO_NATIVE_F16 1
#else
#define MIXPREC_RSIO_NATIVE_F16 0
#endif

/// Upper bound on f32 lanes of any target: sizes stack buffers for partial vectors.
inline constexpr std::size_t kMaxF32Lanes = HWY_MAX_BYTES / sizeof(float);

/// A compile-time dtype code (0 f32, 1 bf16, 2 f16).
template <int DT>
struct DTag {
  static constexpr int value = DT;
};

/// Calls f(DTag<dt>{}) for a run-time dtype code.
template <class F>
HWY_INLINE void WithDType(int dt, F&& f) {
  switch (dt) {
    case 1: f(DTag<1>{}); return;
    case 2: f(DTag<2>{}); return;
    default: f(DTag<0>{}); return;
  }
}

/// Element i of a dtype-DT buffer as f32 (exact).
template <int DT>
HWY_INLINE float LoadScalar(const void* base, std::size_t i) {
  if constexpr (DT == 0) {
    return static_cast<const float*>(base)[i];
  } else {
    std::uint16_t bits;
    std::memcpy(&bits, static_cast<const char*>(base) + 2 * i, 2);
    return DT == 1 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
  }
}

/// Stores v rounded once to dtype DT at element i.
template <int DT>
HWY_INLINE void StoreScalar(float v, void* base, std::size_t i) {
  if constexpr (DT == 0) {
    static_cast<float*>(base)[i] = v;
  } else {
    const std::uint16_t bits = DT == 1 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    std::memcpy(static_cast<char*>(base) + 2 * i, &bits, 2);
  }
}

/// Lanes(d) elements from element i of a dtype-DT buffer, widened to f32.
template <int DT, class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const void* base, std::size_t i) {
  if constexpr (DT == 0) {
    return hn::LoadU(d, static_cast<const float*>(base) + i);
  } else {
    const hn::Rebind<std::uint16_t, D> du16;
    const hn::RebindToUnsigned<D> du32;
    const auto* p = static_cast<const std::uint16_t*>(base) + i;
    if constexpr (DT == 1) {
      // bf16 is the top half of an f32.
      return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
    } else {
#if MIXPREC_RSIO_NATIVE_F16
      const hn::Rebind<hwy::float16_t, D> df16;
      return hn::PromoteTo(d, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
#else
      // Integer widening: normals and Inf/NaN by rebiasing the exponent, subnormals (exact
      // small integers times 2^-24) through the int -> float conversion.
      const hn::RebindToSigned<D> di32;
      const auto bits = hn::PromoteTo(du32, hn::LoadU(du16, p));
      const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(du32, 0x8000u)));
      const auto em = hn::BitCast(di32, hn::And(bits, hn::Set(du32, 0x7fffu)));
      const auto normal = hn::Add(hn::ShiftLeft<13>(em), hn::Set(di32, 112 << 23));
      const auto mant = hn::And(em, hn::Set(di32, 0x3ff));
      const auto quiet = hn::IfThenElseZero(hn::Gt(mant, hn::Zero(di32)), hn::Set(di32, 0x400000));
      const auto special = hn::Or(hn::Or(hn::ShiftLeft<13>(em), hn::Set(di32, 0x7f800000)), quiet);
      const auto sub = hn::BitCast(
          di32, hn::Mul(hn::ConvertTo(d, em), hn::Set(d, 1.0f / 16777216.0f)));
      auto mag = hn::IfThenElse(hn::Lt(em, hn::Set(di32, 0x400)), sub, normal);
      mag = hn::IfThenElse(hn::Gt(em, hn::Set(di32, 0x7bff)), special, mag);
      return hn::BitCast(d, hn::Or(hn::BitCast(du32, mag), sign));
#endif
    }
  }
}

/// Stores the Lanes(d) values of v at element i of a dtype-DT buffer, rounded to nearest even.
template <int DT, class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, void* base, std::size_t i) {
  if constexpr (DT == 0) {
    hn::StoreU(v, d, static_cast<float*>(base) + i);
  } else if constexpr (DT == 1) {
    // f32_to_bf16_bits: add 0x7fff plus the kept lsb, keep the top half; a NaN keeps its top
    // half with the quiet bit set.
    const hn::RebindToUnsigned<D> du32;
    const hn::RebindToSigned<D> di32;
    const hn::Rebind<std::uint16_t, D> du16;
    const auto bits = hn::BitCast(du32, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du32, 0x7fffu)), lsb));
    const auto nan = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du32, 0x40u));
    const auto top = hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(v)), nan, rounded);
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, top)), du16,
               static_cast<std::uint16_t*>(base) + i);
  } else {
#if MIXPREC_RSIO_NATIVE_F16
    const hn::Rebind<hwy::float16_t, D> df16;
    hn::StoreU(hn::DemoteTo(df16, v), df16, static_cast<hwy::float16_t*>(base) + i);
#else
    // No exact vector narrowing on this target: round each lane with the scalar spec.
    HWY_ALIGN float lanes[kMaxF32Lanes];
    hn::Store(v, d, lanes);
    for (std::size_t j = 0; j < hn::Lanes(d); ++j) StoreScalar<2>(lanes[j], base, i + j);
#endif
  }
}

/// The count < Lanes(d) elements from element i, widened, padded with `fill` (the identity of
/// the caller's operation) up to a full vector.
template <int DT, class D>
HWY_INLINE hn::Vec<D> LoadF32Partial(D d, const void* base, std::size_t i, std::size_t count,
                                     float fill) {
  HWY_ALIGN float lanes[kMaxF32Lanes];
  for (std::size_t j = 0; j < hn::Lanes(d); ++j) {
    lanes[j] = j < count ? LoadScalar<DT>(base, i + j) : fill;
  }
  return hn::Load(d, lanes);
}

/// Stores the first count < Lanes(d) lanes of v at element i, each rounded once.
template <int DT, class D>
HWY_INLINE void StoreF32Partial(D d, hn::Vec<D> v, void* base, std::size_t i,
                                std::size_t count) {
  HWY_ALIGN float lanes[kMaxF32Lanes];
  hn::Store(v, d, lanes);
  for (std::size_t j = 0; j < count; ++j) StoreScalar<DT>(lanes[j], base, i + j);
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
