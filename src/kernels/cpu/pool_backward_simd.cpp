// Max-pooling backward for 2x2 windows, stride 2, as one Highway source for every target.
// Each input row is written once: lane x of the row takes dy of output x/2 when argmax names
// x, else +0. dy and argmax are loaded half a vector at a time and each lane duplicated in order
// (zero-extend every 32-bit lane to 64 bits and copy it into the high half), so the comparison
// with the input indices needs no gather.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/pool_backward_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/pool_backward_simd.h"
#include "mixprec/core/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
#if HWY_TARGET != HWY_SCALAR
/// Lanes(d)/2 32-bit values at p, each twice, in order: [p0, p0, p1, p1, ...] as d's type.
template <class D, class DHalf>
HWY_INLINE hn::Vec<D> DuplicatePairs(D d, DHalf /*dh*/, hn::Vec<DHalf> half) {
  const hn::RebindToUnsigned<DHalf> duh;
  const hn::Repartition<std::uint64_t, D> d64;
  const auto wide = hn::PromoteTo(d64, hn::BitCast(duh, half));
  return hn::BitCast(d, hn::Or(wide, hn::ShiftLeft<32>(wide)));
}
#endif

#if HWY_TARGET != HWY_SCALAR
/// Writes columns [0, covered) of input row iy (all inside windows) with vectors of tag D: full
/// vectors, then one more ending at the last column that overlaps the one before (its columns
/// get the same values again). Returns covered, or 0 if the row is narrower than one vector.
template <class D, typename T>
HWY_INLINE std::int64_t Backward2x2Row(D df, const T* HWY_RESTRICT dyr,
                                       const std::int32_t* HWY_RESTRICT ar, std::int64_t first,
                                       std::int64_t covered, T* HWY_RESTRICT row) {
  const auto n = static_cast<std::int64_t>(hn::Lanes(df));
  if (covered < n) return 0;
  const hn::Half<D> dh;
  const hn::RebindToSigned<D> di;
  const hn::RebindToSigned<decltype(dh)> dhi;
  const auto zero = hn::Zero(df);
  const auto columns = [&](std::int64_t x) {  // x and n are even: pairs stay whole
    const auto g = DuplicatePairs(df, dh, LoadF32(dh, dyr + x / 2));
    const auto a = DuplicatePairs(di, dhi, hn::LoadU(dhi, ar + x / 2));
    const auto index = hn::Iota(di, static_cast<std::int32_t>(first + x));
    const auto hit = hn::RebindMask(df, hn::Eq(a, index));
    StoreF32(df, hn::IfThenElseZero(hit, hn::Add(zero, g)), row + x);
  };
  std::int64_t x = 0;
  for (; x + n <= covered; x += n) columns(x);
  if (x < covered) columns(covered - n);
  return covered;
}
#endif

template <typename T>
void Backward2x2Planes(const Pool2dDesc& d, const T* HWY_RESTRICT dy,
                       const std::int32_t* HWY_RESTRICT argmax, T* HWY_RESTRICT dx,
                       std::int64_t planes) {
  const std::int64_t oh = d.out_h(), ow = d.out_w(), h = d.h, w = d.w;
  const std::int64_t covered = 2 * ow;  // input columns inside a window
  for (std::int64_t q = 0; q < planes; ++q) {
    const T* dyq = dy + q * oh * ow;
    const std::int32_t* aq = argmax + q * oh * ow;
    T* dxq = dx + q * h * w;
    for (std::int64_t iy = 0; iy < h; ++iy) {
      T* row = dxq + iy * w;
      std::int64_t x = 0;
      if (iy < 2 * oh) {
        const T* dyr = dyq + (iy / 2) * ow;
        const std::int32_t* ar = aq + (iy / 2) * ow;
#if HWY_TARGET != HWY_SCALAR
        // The widest vectors that fit the row (a CNN's 14 or 28 columns are narrower than, or
        // not a multiple of, an AVX-512 vector): no column is left to the scalar loop.
        x = Backward2x2Row(hn::ScalableTag<float>(), dyr, ar, iy * w, covered, row);
        if (x == 0) x = Backward2x2Row(hn::CappedTag<float, 8>(), dyr, ar, iy * w, covered, row);
        if (x == 0) x = Backward2x2Row(hn::CappedTag<float, 4>(), dyr, ar, iy * w, covered, row);
#endif
        for (; x < covered; ++x) {
          const std::int64_t o = x / 2;
          row[x] = ar[o] == iy * w + x ? T(0.0f + static_cast<float>(dyr[o])) : T(0.0f);
        }
      }
      for (; x < w; ++x) row[x] = T(0.0f);  // an odd last column or row is in no window
    }
  }
}

void MaxPool2x2Backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                        void* dx, std::int64_t planes) {
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    Backward2x2Planes(d, static_cast<const T*>(dy), argmax, static_cast<T*>(dx), planes);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {
HWY_EXPORT(MaxPool2x2Backward);

namespace pool_simd {
void max_pool_2x2_backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                           void* dx, std::int64_t planes) {
  HWY_DYNAMIC_DISPATCH(MaxPool2x2Backward)(d, dy, argmax, dx, planes);
}
}  // namespace pool_simd
}  // namespace mixprec::kernels::cpu
#endif
