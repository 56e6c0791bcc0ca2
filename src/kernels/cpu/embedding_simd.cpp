// Highway row kernels of the embedding family (contract in embedding_simd.h): one source,
// every SIMD target. The accumulation adds each element once, in the caller's order, with the
// same f32 addition the reference uses, so the sums are bit-identical to the reference's.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/embedding_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/embedding_simd.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
void CopyRow(const void* src, void* dst, std::size_t bytes) {
  const hn::ScalableTag<std::uint8_t> d8;
  const std::size_t N = hn::Lanes(d8);
  const auto* s = static_cast<const std::uint8_t*>(src);
  auto* o = static_cast<std::uint8_t*>(dst);
  std::size_t i = 0;
  for (; i + N <= bytes; i += N) hn::StoreU(hn::LoadU(d8, s + i), d8, o + i);
  if (i < bytes) std::memcpy(o + i, s + i, bytes - i);  // a copy: exact however it is done
}

void AccumulateRow(float* acc, const void* src, int dt, std::size_t n) {
  WithDType(dt, [&](auto t) {
    using T = Elem<decltype(t)>;
    const T* s = static_cast<const T*>(src);
    const hn::ScalableTag<float> d;
    const std::size_t N = hn::Lanes(d);
    std::size_t i = 0;
    for (; i + N <= n; i += N) {
      hn::StoreU(hn::Add(hn::LoadU(d, acc + i), LoadF32(d, s + i)), d, acc + i);
    }
    if (i < n) {
      const std::size_t r = n - i;
      StoreF32N(d, hn::Add(LoadF32N(d, acc + i, r), LoadF32N(d, s + i, r)), acc + i, r);
    }
  });
}

void StoreRow(const float* acc, void* dst, int dt, std::size_t n) {
  WithDType(dt, [&](auto t) {
    using T = Elem<decltype(t)>;
    T* o = static_cast<T*>(dst);
    const hn::ScalableTag<float> d;
    const std::size_t N = hn::Lanes(d);
    std::size_t i = 0;
    for (; i + N <= n; i += N) StoreF32(d, hn::LoadU(d, acc + i), o + i);
    if (i < n) StoreF32N(d, LoadF32N(d, acc + i, n - i), o + i, n - i);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(CopyRow);
HWY_EXPORT(AccumulateRow);
HWY_EXPORT(StoreRow);

namespace {
int code(DType t) {
  MIXPREC_ASSERT(!is_storage_only(t));
  return static_cast<int>(t);
}
}  // namespace

void embedding_copy_row(const void* src, void* dst, std::size_t bytes) {
  HWY_DYNAMIC_DISPATCH(CopyRow)(src, dst, bytes);
}
void embedding_accumulate_row(float* acc, const void* src, DType dtype, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(AccumulateRow)(acc, src, code(dtype), static_cast<std::size_t>(n));
}
void embedding_store_row(const float* acc, void* dst, DType dtype, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(StoreRow)(acc, dst, code(dtype), static_cast<std::size_t>(n));
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
