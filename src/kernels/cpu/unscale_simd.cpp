// Fused gradient unscale + non-finite check (+ optional amax) over Highway, for f32, bf16 and f16
// gradients: one source compiled for every target, chosen at run time.
//
// Bit-identical to the scalar reference (ref/unscale_ref.cpp) on every target: each output is one
// correctly rounded f32 multiply (then, for 16-bit gradients, the round-to-nearest-even narrowing
// of convert-inl.h), and the verdict and amax are exact (an OR and a max).
//
// The verdict and amax work on the magnitude bits |y| of the (rounded) outputs as signed
// integers: a finite |y| is at most 0x7f7fffff, Inf and NaN are above it, and for non-negative
// floats the integer order is the float order. So "any non-finite" is "max |y| bits > 0x7f7fffff"
// (one integer max per vector) and amax is the integer max over the finite lanes (non-finite
// lanes contribute 0). Only the outputs are checked: for a finite non-zero inv (the dispatcher's
// precondition) an Inf/NaN input always gives an Inf/NaN output, so this is exactly the
// reference's "input or output non-finite".
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/unscale_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/unscale_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace {

constexpr std::int32_t kMaxFiniteBits = 0x7f7fffff;

/// Raises `all` by the magnitude bits of y and, with kAmax, `finite` by those of its finite lanes.
template <bool kAmax>
HWY_INLINE void Observe(VF y, VI& all, VI& finite) {
  const DI di;
  const VI magnitude = hn::And(hn::BitCast(di, y), hn::Set(di, 0x7fffffff));
  all = hn::Max(all, magnitude);
  if constexpr (kAmax) {
    finite = hn::Max(finite, hn::IfThenZeroElse(hn::Gt(magnitude, hn::Set(di, kMaxFiniteBits)),
                                                magnitude));
  }
}

/// The Lanes() elements at in/out: unscaled, stored, observed. Elem is float or std::uint16_t.
template <class Elem, int DT, bool kAmax>
HWY_INLINE void Step(const Elem* in, Elem* out, VF inv, VI& all, VI& finite) {
  const DF df;
  if constexpr (DT == kF32) {
    const VF y = hn::Mul(hn::LoadU(df, in), inv);
    hn::StoreU(y, df, out);
    Observe<kAmax>(y, all, finite);
  } else {
    const D16<DF> d16;
    const auto bits = hn::LoadU(d16, in);
    if constexpr (DT == kBF16) {
      const auto rounded = NarrowBF16(df, hn::Mul(WidenBF16(df, bits), inv));
      hn::StoreU(rounded, d16, out);
      Observe<kAmax>(WidenBF16(df, rounded), all, finite);
    } else {
      const auto rounded = NarrowF16(df, hn::Mul(WidenF16(df, bits), inv));
      hn::StoreU(rounded, d16, out);
      Observe<kAmax>(WidenF16(df, rounded), all, finite);
    }
  }
}

/// The whole loop: vectors in place, then the last partial vector through zero-padded copies
/// (zeros are finite with |0| = 0, so they change neither the verdict nor amax).
template <class Elem, int DT, bool kAmax>
bool Loop(const Elem* in, Elem* out, std::size_t n, float inv_scalar, float* amax) {
  const DF df;
  const DI di;
  const VF inv = hn::Set(df, inv_scalar);
  const std::size_t lanes = hn::Lanes(df);
  VI all = hn::Zero(di);
  VI finite = hn::Zero(di);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) Step<Elem, DT, kAmax>(in + i, out + i, inv, all, finite);
  if (i < n) {
    HWY_ALIGN Elem tail[kMaxF32Lanes] = {};
    std::memcpy(tail, in + i, (n - i) * sizeof(Elem));
    Step<Elem, DT, kAmax>(tail, tail, inv, all, finite);
    std::memcpy(out + i, tail, (n - i) * sizeof(Elem));
  }
  if constexpr (kAmax) {
    const float a = std::bit_cast<float>(hn::GetLane(hn::MaxOfLanes(di, finite)));
    if (a > *amax) *amax = a;  // both non-negative: the reference's max, bit for bit
  }
  return hn::GetLane(hn::MaxOfLanes(di, all)) > kMaxFiniteBits;
}

template <class Elem, int DT>
bool WithAmax(const Elem* in, Elem* out, std::size_t n, float inv, float* amax) {
  return amax != nullptr ? Loop<Elem, DT, true>(in, out, n, inv, amax)
                         : Loop<Elem, DT, false>(in, out, n, inv, nullptr);
}

}  // namespace

// Non-template entry points, one per target (HWY_EXPORT needs plain function names).
bool UnscaleF32(const float* in, float* out, std::size_t n, float inv, float* amax) {
  return WithAmax<float, kF32>(in, out, n, inv, amax);
}
bool Unscale16(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv, DType dtype,
               float* amax) {
  return dtype == DType::bf16 ? WithAmax<std::uint16_t, kBF16>(in, out, n, inv, amax)
                              : WithAmax<std::uint16_t, kF16>(in, out, n, inv, amax);
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(UnscaleF32);
HWY_EXPORT(Unscale16);

bool unscale_f32_simd(const float* in, float* out, std::size_t n, float inv, float* amax) {
  return HWY_DYNAMIC_DISPATCH(UnscaleF32)(in, out, n, inv, amax);
}

bool unscale_16bit_simd(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv,
                        DType dtype, float* amax) {
  return HWY_DYNAMIC_DISPATCH(Unscale16)(in, out, n, inv, dtype, amax);
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
