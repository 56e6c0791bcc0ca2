// The CUDA fp8 recipe kernels (kernels/fp8_scale.h), each element and each scale the
// reference's own math (kernels/spec/fp8_scale_math.h, MIXPREC_HD), so the bits match the cpu's.
//  - fp8_scaled_cast: a grid-stride loop; each thread keeps the largest |x| bit pattern it saw,
//    a warp combines them with shuffles and one lane per warp raises *amax (zeroed first, on
//    the stream) with an integer atomicMax. A max of integers is order-free, so the amax is the
//    reference's bits whatever the schedule, NaN and Inf included (their patterns lie above
//    every finite one).
//  - fp8_scaled_cast_transpose: 32 x 32 tiles through shared memory, one block of 32 x 8
//    threads per tile (a grid-stride loop over tiles): x and y are read and written along a
//    tile's rows and yt along its columns, 32 consecutive elements per warp each time
//    (coalesced), with the amax combined as the cast's. Compiled, never run on a GPU.
//  - fp8_scale_update: one thread. The history is a few dozen to a few thousand floats, read
//    once per step; one thread walks it in a few microseconds, and a launch costs as much as
//    a parallel shift would save. The host never reads amax, scale or history.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/fp8_scale.h"
#include "kernels/spec/fp8_scale_checks.h"
#include "kernels/spec/fp8_scale_math.h"

namespace mixprec::kernels::cuda {
namespace {

/// Raises *amax_bits (when not null) to the largest of the calling block's m: a warp combines
/// its lanes' bit patterns with shuffles and its first lane does one integer atomicMax. Every
/// thread of the block calls it (the shuffles need the whole warp).
__device__ void raise_amax(unsigned m, unsigned* amax_bits) {
  if (amax_bits == nullptr) return;
  for (int step = 16; step > 0; step /= 2) m = max(m, __shfl_down_sync(0xffffffffu, m, step));
  const unsigned lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32;
  if (lane == 0 && m != 0) atomicMax(amax_bits, m);
}

template <class T, bool kCast>
__global__ void fp8_scaled_cast_kernel(const T* x, std::uint8_t* y, std::int64_t n,
                                       const float* scale, bool e4m3, unsigned* amax_bits) {
  const float s = kCast ? *scale : 1.0f;
  unsigned m = 0;
  MIXPREC_GRID_STRIDE(i, n) {
    const float v = static_cast<float>(x[i]);
    m = max(m, static_cast<unsigned>(fp8_math::abs_bits(v)));
    if constexpr (kCast) y[i] = fp8_math::scaled_cast(v, s, e4m3);
  }
  raise_amax(m, amax_bits);
}

/// The cast-transpose's tile side and the rows of it one pass of a 32 x 8 block covers.
constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;

template <class T>
__global__ void fp8_scaled_cast_transpose_kernel(const T* x, std::int64_t rows, std::int64_t cols,
                                                 std::uint8_t* y, std::uint8_t* yt,
                                                 const float* scale, bool e4m3,
                                                 unsigned* amax_bits) {
  // One byte per 32-bit word: a column of the tile then lies in 32 different banks, so the
  // transposed reads do not conflict (bytes packed four to a word would, eight ways).
  __shared__ unsigned tile[kTile][kTile + 1];
  const float s = *scale;
  const std::int64_t col_tiles = (cols + kTile - 1) / kTile;
  const std::int64_t tiles = (rows + kTile - 1) / kTile * col_tiles;
  unsigned m = 0;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::int64_t r0 = t / col_tiles * kTile, c0 = t % col_tiles * kTile;
    const std::int64_t c = c0 + threadIdx.x;
    for (int i = threadIdx.y; i < kTile; i += kTileRowsPerPass) {
      const std::int64_t r = r0 + i;
      if (r < rows && c < cols) {
        const float v = static_cast<float>(x[r * cols + c]);
        m = max(m, static_cast<unsigned>(fp8_math::abs_bits(v)));
        const std::uint8_t b = fp8_math::scaled_cast(v, s, e4m3);
        if (y != nullptr) y[r * cols + c] = b;
        tile[i][threadIdx.x] = b;
      }
    }
    __syncthreads();
    const std::int64_t r = r0 + threadIdx.x;
    for (int i = threadIdx.y; i < kTile; i += kTileRowsPerPass) {
      const std::int64_t ct = c0 + i;
      if (ct < cols && r < rows) yt[ct * rows + r] = static_cast<std::uint8_t>(tile[threadIdx.x][i]);
    }
    __syncthreads();  // the next tile overwrites this one
  }
  raise_amax(m, amax_bits);
}

__global__ void fp8_scale_update_kernel(float* history, std::int64_t len, const float* amax,
                                        float* scale, bool e4m3, int margin, float* found_inf) {
  const float a = *amax;
  if (!fp8_math::amax_is_finite(a)) {
    if (found_inf != nullptr) *found_inf = 1.0f;
    return;
  }
  float window = a;
  for (std::int64_t i = len - 1; i > 0; --i) {
    history[i] = history[i - 1];
    window = window < history[i] ? history[i] : window;  // std::max's choice, as the reference
  }
  history[0] = a;
  *scale = fp8_math::updated_scale(window, *scale, fp8_math::fp8_max(e4m3), margin);
}

}  // namespace

void fp8_scaled_cast(const void* x, DType x_dtype, void* y, DType format, std::int64_t n,
                     const float* scale, float* amax) {
  detail::check_fp8_scaled_cast(x_dtype, y, format, n, scale, amax);
  auto* amax_bits = reinterpret_cast<unsigned*>(amax);
  if (amax_bits != nullptr) {
    // The contract sets *amax: 0 for no element, else every block raises it from 0.
    check_cuda(cudaMemsetAsync(amax_bits, 0, sizeof(unsigned), stream()), "fp8_scaled_cast",
               "cudaMemsetAsync");
  }
  if (n == 0) return;
  const bool e4m3 = format == DType::f8e4m3;
  auto* out = static_cast<std::uint8_t*>(y);
  dispatch(x_dtype, [&](auto t) {
    using T = decltype(t);
    const auto* in = static_cast<const T*>(x);
    if (out != nullptr) {
      fp8_scaled_cast_kernel<T, true><<<grid(n), kThreads, 0, stream()>>>(in, out, n, scale, e4m3,
                                                                          amax_bits);
    } else {
      fp8_scaled_cast_kernel<T, false><<<grid(n), kThreads, 0, stream()>>>(in, nullptr, n, scale,
                                                                           e4m3, amax_bits);
    }
    check_launch("fp8_scaled_cast");
  });
}

void fp8_scaled_cast_transpose(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                               void* y, void* yt, DType format, const float* scale, float* amax) {
  detail::check_fp8_scaled_cast_transpose(x_dtype, rows, cols, yt, format, scale);
  auto* amax_bits = reinterpret_cast<unsigned*>(amax);
  if (amax_bits != nullptr) {
    check_cuda(cudaMemsetAsync(amax_bits, 0, sizeof(unsigned), stream()),
               "fp8_scaled_cast_transpose", "cudaMemsetAsync");
  }
  const std::int64_t tiles = (rows + kTile - 1) / kTile * ((cols + kTile - 1) / kTile);
  if (tiles == 0) return;
  const dim3 blocks(static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  const dim3 threads(kTile, kTileRowsPerPass);
  dispatch(x_dtype, [&](auto t) {
    using T = decltype(t);
    fp8_scaled_cast_transpose_kernel<T><<<blocks, threads, 0, stream()>>>(
        static_cast<const T*>(x), rows, cols, static_cast<std::uint8_t*>(y),
        static_cast<std::uint8_t*>(yt), scale, format == DType::f8e4m3, amax_bits);
    check_launch("fp8_scaled_cast_transpose");
  });
}

void fp8_scale_update(float* history, std::int64_t len, const float* amax, float* scale,
                      DType format, int margin, float* found_inf) {
  detail::check_fp8_scale_update(len, amax, scale, format, margin);
  fp8_scale_update_kernel<<<1, 1, 0, stream()>>>(history, len, amax, scale,
                                                 format == DType::f8e4m3, margin, found_inf);
  check_launch("fp8_scale_update");
}

}  // namespace mixprec::kernels::cuda
