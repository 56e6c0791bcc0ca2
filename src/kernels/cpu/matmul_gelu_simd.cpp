// The gelu_tanh backward form's pass (matmul_gelu_simd.h): one sweep over a tile of the GEMM's
// result that multiplies it by gelu_tanh'(aux) and sums the columns of what it stores, so the
// bias gradient costs no second read of the matrix. Row by row, a vector of columns at a time
// (the rows are contiguous); each column's sum adds its rows in order, as reduce's column
// kernel does, and the last partial vector runs the same vector code on a zero-padded load, as
// the elementwise kernels' tails do: every element gets unary_backward's bits, every sum
// reduce's.
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

template <int DT>
void GeluTanhBackwardTileT(void* c, const void* aux, std::size_t n, std::size_t k0,
                           std::size_t k1, std::size_t j0, std::size_t j1, float* sums) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  if (sums != nullptr) {
    for (std::size_t j = j0; j < j1; ++j) sums[j - j0] = 0.0f;
  }
  // One column vector: the gradient stored rounded, and the stored value added to its sums.
  const auto step = [&](std::size_t i, std::size_t j, std::size_t count) {
    const VF x = LoadF32N<DT>(d, aux, i, count);
    const VF v = vec::gelu_tanh::backward(d, x, LoadF32N<DT>(d, c, i, count));
    StoreF32N<DT>(d, v, c, i, count);
    if (sums == nullptr) return;
    const VF stored = RoundTo<Storage<DT>>(d, v);
    float* s = sums + (j - j0);
    if (count == N) {
      hn::StoreU(hn::Add(hn::LoadU(d, s), stored), d, s);
    } else {
      HWY_ALIGN float lanes[kMaxF32Lanes];
      hn::Store(stored, d, lanes);
      for (std::size_t l = 0; l < count; ++l) s[l] += lanes[l];
    }
  };
  for (std::size_t k = k0; k < k1; ++k) {
    std::size_t j = j0;
    for (; j + N <= j1; j += N) step(k * n + j, j, N);
    if (j < j1) step(k * n + j, j, j1 - j);
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
