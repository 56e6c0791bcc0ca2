// The CUDA selections: masked_fill and where, one thread per element. Every output element is
// either one input's bits or the fill value rounded once on the host's constexpr conversion, as
// the reference's, so the results are its bits (NaN payloads included). The mask of masked_fill
// is read through its strided layout (stride 0 where broadcast), collapsed to as few dimensions
// as give the same offsets. Deterministic: each element is one thread's.
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layout_collapse.cuh"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/masked_fill.h"

namespace mixprec::kernels::cuda {
namespace {

/// Operand 0 of l is the mask; x and out are contiguous, indexed by the element itself.
template <class T, class TM>
__global__ void masked_fill_kernel(Layout l, std::int64_t n, const T* x, const TM* mask, T fill,
                                   T* out) {
  MIXPREC_GRID_STRIDE(i, n) {
    out[i] = static_cast<float>(mask[collapsed_offset(l, 0, i)]) != 0.0f ? fill : x[i];
  }
}

/// W: an unsigned word of the element's size (where moves bits, whatever the dtype).
template <class TC, class W>
__global__ void where_kernel(std::int64_t n, const TC* cond, const W* a, const W* b, W* out) {
  MIXPREC_GRID_STRIDE(i, n) out[i] = static_cast<float>(cond[i]) != 0.0f ? a[i] : b[i];
}

}  // namespace

void masked_fill(std::span<const std::int64_t> shape, const void* x, DType dtype,
                 const StridedInput& mask, float value, void* out) {
  const std::size_t rank = shape.size();
  const std::int64_t n = detail::masked_fill_count(shape, mask);
  // x and out are contiguous: their strides as the layout's second operand keep collapsed()
  // from merging dimensions the mask does not step through evenly.
  std::vector<std::int64_t> contiguous(rank, 1);
  for (std::size_t d = rank; d-- > 1;) contiguous[d - 1] = contiguous[d] * shape[d];
  const Layout full = layout("masked_fill", shape, mask.strides, contiguous);
  dispatch(dtype, mask.dtype, [&](auto tx, auto tm) {
    using T = decltype(tx);
    using TM = decltype(tm);
    if (n == 0) return;
    masked_fill_kernel<T, TM><<<grid(n), kThreads, 0, stream()>>>(
        collapsed(full), n, static_cast<const T*>(x), static_cast<const TM*>(mask.data), T(value),
        static_cast<T*>(out));
    check_launch("masked_fill");
  });
}

void where(std::int64_t n, const void* cond, DType cond_dtype, const void* a, const void* b,
           DType dtype, void* out) {
  MIXPREC_CHECK(n >= 0, ShapeError, "where", "negative element count " << n);
  dispatch(cond_dtype, [&](auto tc) {
    using TC = decltype(tc);
    if (n == 0) return;
    with_word_of_size(size_of(dtype), [&](auto w) {
      using W = decltype(w);
      where_kernel<TC, W><<<grid(n), kThreads, 0, stream()>>>(
          n, static_cast<const TC*>(cond), static_cast<const W*>(a), static_cast<const W*>(b),
          static_cast<W*>(out));
    });
    check_launch("where");
  });
}

}  // namespace mixprec::kernels::cuda
