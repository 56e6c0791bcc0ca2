// Highway masked_fill row kernel (contract in masked_fill_simd.h): one source, every SIMD
// target. The mask is widened to f32 and compared with 0 as !(m == 0), so NaN selects like the
// reference's m != 0; x moves as raw bits (LoadBits/StoreBits), never through f32, so every
// element is exactly x's or the fill value's bits. The last partial vector runs on a padded copy.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/masked_fill_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/masked_fill_simd.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
template <class T, class TM>
HWY_INLINE void FillRow(const T* x, const TM* m, T fill, T* out, std::size_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const std::size_t N = hn::Lanes(d);
  std::uint32_t fill_bits = 0;
  std::memcpy(&fill_bits, &fill, sizeof(T));
  const auto fb = hn::Set(du, fill_bits);
  const auto zero = hn::Zero(d);
  auto one = [&](const T* xs, const TM* ms, T* o) {
    const auto sel = hn::RebindMask(du, hn::Not(hn::Eq(LoadF32(d, ms), zero)));
    StoreBits(du, hn::IfThenElse(sel, fb, LoadBits(du, xs)), o);
  };
  std::size_t i = 0;
  for (; i + N <= n; i += N) one(x + i, m + i, out + i);
  if (i < n) {
    const std::size_t r = n - i;
    HWY_ALIGN T xb[hn::MaxLanes(decltype(d)())] = {};
    HWY_ALIGN TM mb[hn::MaxLanes(decltype(d)())] = {};
    HWY_ALIGN T ob[hn::MaxLanes(decltype(d)())];
    std::memcpy(static_cast<void*>(xb), x + i, r * sizeof(T));
    std::memcpy(static_cast<void*>(mb), m + i, r * sizeof(TM));
    one(xb, mb, ob);
    std::memcpy(static_cast<void*>(out + i), ob, r * sizeof(T));
  }
}

void MaskedFillRow(const void* x, int dt, const void* m, int mdt, float value, void* out,
                   std::size_t n) {
  WithDType(dt, [&](auto tx) {
    using T = Elem<decltype(tx)>;
    WithDType(mdt, [&](auto tm) {
      using TM = Elem<decltype(tm)>;
      FillRow(static_cast<const T*>(x), static_cast<const TM*>(m), T(value), static_cast<T*>(out),
              n);
    });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(MaskedFillRow);

void masked_fill_row(const void* x, DType dtype, const void* mask, DType mask_dtype, float value,
                     void* out, std::int64_t n) {
  MIXPREC_ASSERT(!is_storage_only(dtype) && !is_storage_only(mask_dtype));
  HWY_DYNAMIC_DISPATCH(MaskedFillRow)(x, static_cast<int>(dtype), mask,
                                      static_cast<int>(mask_dtype), value, out,
                                      static_cast<std::size_t>(n));
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
