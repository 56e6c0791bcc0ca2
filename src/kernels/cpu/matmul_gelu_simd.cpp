// The gelu_tanh backward form's pass (matmul_gelu_simd.h): one sweep over a tile of the GEMM's
// result that multiplies it by gelu_tanh'(aux) and sums the columns of what it stores, so the
// bias gradient costs no second read of the matrix. Row by row over the tile, a vector of
// columns at a time and the last partial one on a zero-padded load, as the elementwise kernels
// run; each value rounded once, stored and added to its column's sum in row order: every
// element gets unary_backward's bits, every column sum reduce's.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_gelu_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/vecmath-inl.h"

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/matmul_gelu_simd.h"
#include "mixprec/core/error.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {

/// One column vector of one row: c = gelu_tanh'(aux) c stored rounded (count lanes), and the
/// stored values as f32 (what a load of them gives; the padding lanes are 0 and unused).
template <int DT>
HWY_INLINE VF GradStep(DF d, void* c, const void* aux, std::size_t i, std::size_t count) {
  const VF v = vec::gelu_tanh::backward(d, LoadF32N<DT>(d, aux, i, count), LoadF32N<DT>(d, c, i, count));
  if constexpr (DT == kF32) {
    StoreF32N<DT>(d, v, c, i, count);
    return v;
  } else {
    if (count != hn::Lanes(d)) {  // the row's last partial vector
      StoreF32N<DT>(d, v, c, i, count);
      return RoundTo<Storage<DT>>(d, v);
    }
    // Rounded once: the bits stored are the bits summed.
    const auto bits = DT == kBF16 ? NarrowBF16(d, v) : NarrowF16(d, v);
    hn::StoreU(bits, D16<DF>(), reinterpret_cast<std::uint16_t*>(static_cast<Storage<DT>*>(c) + i));
    return DT == kBF16 ? WidenBF16(d, bits) : WidenF16(d, bits);
  }
}

/// Rows [k0, k1), columns [j0, j1) of the tile, row by row (each row's columns are contiguous,
/// so the rows stream through the cache as the elementwise kernels' do); each column's stored
/// values added to its sum in row order.
template <int DT>
void GeluTanhBackwardTileT(void* c, const void* aux, std::size_t n, std::size_t k0,
                           std::size_t k1, std::size_t j0, std::size_t j1, float* sums) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  if (sums != nullptr) {
    for (std::size_t j = j0; j < j1; ++j) sums[j - j0] = 0.0f;
  }
  for (std::size_t k = k0; k < k1; ++k) {
    std::size_t j = j0;
    for (; j + N <= j1; j += N) {
      const VF stored = GradStep<DT>(d, c, aux, k * n + j, N);
      if (sums != nullptr) hn::StoreU(hn::Add(hn::LoadU(d, sums + (j - j0)), stored), d, sums + (j - j0));
    }
    if (j < j1) {
      const VF stored = GradStep<DT>(d, c, aux, k * n + j, j1 - j);
      if (sums != nullptr) {
        HWY_ALIGN float lanes[kMaxF32Lanes];
        hn::Store(stored, d, lanes);
        for (std::size_t l = 0; l < j1 - j; ++l) sums[j - j0 + l] += lanes[l];
      }
    }
  }
}

void GeluTanhBackwardTile(int dt, void* c, const void* aux, std::int64_t n, std::int64_t k0,
                          std::int64_t k1, std::int64_t j0, std::int64_t j1, float* sums) {
  WithDType(dt, [&](auto t) {
    GeluTanhBackwardTileT<decltype(t)::value>(
        c, aux, static_cast<std::size_t>(n), static_cast<std::size_t>(k0),
        static_cast<std::size_t>(k1), static_cast<std::size_t>(j0), static_cast<std::size_t>(j1),
        sums);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(GeluTanhBackwardTile);

void gelu_tanh_backward_tile(DType dtype, void* c, const void* aux, std::int64_t n,
                             std::int64_t k0, std::int64_t k1, std::int64_t j0, std::int64_t j1,
                             float* sums) {
  MIXPREC_ASSERT(!is_storage_only(dtype));
  HWY_DYNAMIC_DISPATCH(GeluTanhBackwardTile)(static_cast<int>(dtype), c, aux, n, k0, k1, j0, j1,
                                             sums);
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
