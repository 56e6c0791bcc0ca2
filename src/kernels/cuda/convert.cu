// The CUDA bulk conversions, one thread per element, or per pack of 8 where both buffers are
// 16-byte aligned (vector_io.cuh: 16-byte loads and stores, the same expression per element).
// convert writes the reference's own
// expression D(static_cast<float>(s)) with the host's constexpr scalar types (exact widening, one
// rounding to nearest even, fp8 overflow as float8.h says), so every pair of dtypes, fp8 included,
// gives the reference's bits; the same dtype is a byte move, as the reference's memmove.
// convert_stochastic draws element i's bits from the same Philox stream as the host
// (random_bits(seed, offset + i), constexpr in core/random.h) and rounds with the shared
// core/stochastic_rounding.h. Deterministic: each element is one thread's.
#include <cstddef>
#include <cstdint>

#include "kernels/convert.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/cuda/vector_io.cuh"
#include "mixprec/core/stochastic_rounding.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::cuda {
namespace {

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, std::int64_t n, ElementwisePath path) {
  map_elements(n, path, dst, [](S s) { return D(static_cast<float>(s)); }, src);
}

template <bool kBF16>
__global__ void convert_stochastic_kernel(const float* src, std::uint16_t* dst, std::int64_t n,
                                          std::uint64_t seed, std::uint64_t offset) {
  MIXPREC_GRID_STRIDE(i, n) {
    const std::uint32_t random = mixprec::random_bits(seed, offset + static_cast<std::uint64_t>(i));
    dst[i] = kBF16 ? f32_to_bf16_bits_stochastic(src[i], random)
                  : f32_to_f16_bits_stochastic(src[i], random);
  }
}

/// memmove on device memory: cudaMemcpy leaves overlapping ranges undefined, so an overlapping
/// move goes through scratch.
void move_bytes(void* dst, const void* src, std::size_t bytes) {
  if (dst == src || bytes == 0) return;
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const bool overlap = s < d + bytes && d < s + bytes;
  if (!overlap) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "convert",
               "cudaMemcpyAsync");
    return;
  }
  Scratch staging(bytes);
  check_cuda(cudaMemcpyAsync(staging.as<void>(), src, bytes, cudaMemcpyDeviceToDevice, stream()),
             "convert", "cudaMemcpyAsync");
  check_cuda(cudaMemcpyAsync(dst, staging.as<void>(), bytes, cudaMemcpyDeviceToDevice, stream()),
             "convert", "cudaMemcpyAsync");
}

}  // namespace

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  if (n == 0) return;
  if (src_dtype == dst_dtype) return move_bytes(dst, src, n * size_of(src_dtype));
  const auto count = static_cast<std::int64_t>(n);
  const ElementwisePath path = typed_path(true, {src, dst});
  dispatch_storage(src_dtype, [&](auto s) {
    dispatch_storage(dst_dtype, [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      convert_kernel<S, D><<<map_grid(count, path), kThreads, 0, stream()>>>(
          static_cast<const S*>(src), static_cast<D*>(dst), count, path);
    });
  });
  check_launch("convert");
}

void convert_stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n,
                        std::uint64_t seed, std::uint64_t offset) {
  if (n == 0) return;
  const auto count = static_cast<std::int64_t>(n);
  auto* out = static_cast<std::uint16_t*>(dst);
  if (dst_dtype == DType::bf16) {
    convert_stochastic_kernel<true><<<grid(count), kThreads, 0, stream()>>>(src, out, count, seed,
                                                                            offset);
  } else {
    convert_stochastic_kernel<false><<<grid(count), kThreads, 0, stream()>>>(src, out, count, seed,
                                                                             offset);
  }
  check_launch("convert_stochastic");
}

}  // namespace mixprec::kernels::cuda
