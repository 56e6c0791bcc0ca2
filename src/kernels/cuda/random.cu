// The CUDA counter-based random kernels: the Philox4x32-10 stream of core/random.h, whose
// functions are constexpr and so compile for the device unchanged; element i of a call is
// element offset + i of stream seed, as on the host, whatever the grid. random_bits runs one
// thread per 128-bit Philox block (its four words are consecutive elements); random_uniform one
// thread per element, low + (high - low) * u in f32 (--fmad=false: two roundings, as the
// reference) rounded once to the dtype by the host's constexpr scalar types (fp8 included).
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/random.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::cuda {
namespace {

/// Philox blocks first_block + b for b < blocks; word k of block B is stream element 4B + k,
/// written to out[4B + k - offset] when that element is one of [offset, offset + n).
__global__ void random_bits_kernel(std::uint64_t seed, std::uint64_t offset, std::uint64_t n,
                                   std::uint64_t first_block, std::int64_t blocks,
                                   std::uint32_t* out) {
  MIXPREC_GRID_STRIDE(b, blocks) {
    const std::uint64_t block = first_block + static_cast<std::uint64_t>(b);
    const Philox::Counter words = Philox::block(seed, block);
    for (std::uint64_t k = 0; k < 4; ++k) {
      const std::uint64_t element = block * 4 + k;
      // element - offset wraps below offset to a huge value, so one comparison bounds both ends.
      const std::uint64_t j = element - offset;
      if (j < n) out[j] = words[k];
    }
  }
}

template <class T>
__global__ void random_uniform_kernel(T* out, std::int64_t n, std::uint64_t seed,
                                      std::uint64_t offset, float low, float high) {
  MIXPREC_GRID_STRIDE(i, n) {
    const float u = mixprec::uniform(seed, offset + static_cast<std::uint64_t>(i));
    out[i] = T(low + (high - low) * u);
  }
}

}  // namespace

void random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n) {
  if (n == 0) return;
  // The caller checks offset + n does not pass 2^64, so the last element offset + n - 1 exists.
  const std::uint64_t first_block = offset / 4;
  const std::uint64_t last_block = (offset + (n - 1)) / 4;
  const auto blocks = static_cast<std::int64_t>(last_block - first_block + 1);
  random_bits_kernel<<<grid(blocks), kThreads, 0, stream()>>>(seed, offset, n, first_block, blocks,
                                                              out);
  check_launch("random_bits");
}

void random_uniform(void* out, DType dtype, std::int64_t n, std::uint64_t seed,
                    std::uint64_t offset, float low, float high) {
  if (n <= 0) return;
  dispatch_storage(dtype, [&](auto t) {
    using T = decltype(t);
    random_uniform_kernel<T><<<grid(n), kThreads, 0, stream()>>>(static_cast<T*>(out), n, seed,
                                                                 offset, low, high);
  });
  check_launch("random_uniform");
}

}  // namespace mixprec::kernels::cuda
