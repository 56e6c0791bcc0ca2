// The CUDA strided copy with dtype conversion, one thread per element of the shape: element i
// (row-major) is read at the input's offset and written at the output's, as
// D(static_cast<float>(s)), the reference's own expression with the host's constexpr scalar types
// (exact widening, one rounding to nearest even; fp8 included). A copy between two buffers of
// the same fp8 dtype moves bytes, as the reference's bulk path does (E5M2 NaN payloads kept).
// Deterministic: each output element is one thread's (the output's strides do not alias).
// Where both views are contiguous the copy is a conversion, walked in packs of 8 where both
// buffers are 16-byte aligned (vector_io.cuh: the same expression per element).
#include <cstdint>

#include "kernels/copy.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layout_collapse.cuh"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/cuda/vector_io.cuh"

namespace mixprec::kernels::cuda {
namespace {

/// dst = f(src) element by element: through map_elements where both views are contiguous,
/// else through the collapsed layout's offsets.
template <class S, class D, class F>
__device__ void copy_elements(Layout l, std::int64_t n, ElementwisePath path, const S* src,
                              D* dst, F f) {
  if (path != ElementwisePath::strided) {
    map_elements(n, path, dst, f, src);
    return;
  }
  MIXPREC_GRID_STRIDE(i, n) dst[collapsed_offset(l, 1, i)] = f(src[collapsed_offset(l, 0, i)]);
}

template <class S, class D>
__global__ void copy_kernel(Layout l, std::int64_t n, ElementwisePath path, const S* src,
                            D* dst) {
  copy_elements(l, n, path, src, dst, [](S s) { return D(static_cast<float>(s)); });
}

__global__ void copy_bytes_kernel(Layout l, std::int64_t n, ElementwisePath path,
                                  const std::uint8_t* src, std::uint8_t* dst) {
  copy_elements(l, n, path, src, dst, [](std::uint8_t b) { return b; });
}

}  // namespace

void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out) {
  const Layout full = layout("copy", shape, in.strides, out.strides);
  const std::int64_t n = numel(full);
  if (n == 0) return;
  const Layout l = collapsed(full);
  const ElementwisePath path = typed_path(
      row_major_contiguous(shape, in.strides) && row_major_contiguous(shape, out.strides),
      {in.data, out.data});
  const dim3 blocks = map_grid(n, path);
  if (in.dtype == out.dtype && is_storage_only(in.dtype)) {
    copy_bytes_kernel<<<blocks, kThreads, 0, stream()>>>(
        l, n, path, static_cast<const std::uint8_t*>(in.data),
        static_cast<std::uint8_t*>(out.data));
  } else {
    dispatch_storage(in.dtype, [&](auto s) {
      dispatch_storage(out.dtype, [&](auto d) {
        using S = decltype(s);
        using D = decltype(d);
        copy_kernel<S, D><<<blocks, kThreads, 0, stream()>>>(
            l, n, path, static_cast<const S*>(in.data), static_cast<D*>(out.data));
      });
    });
  }
  check_launch("copy");
}

}  // namespace mixprec::kernels::cuda
