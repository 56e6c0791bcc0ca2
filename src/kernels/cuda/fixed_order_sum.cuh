#pragma once
// Sums over a warp or a block in a fixed tree (shuffles down by 16, 8, 4, 2, 1, then the
// warps' partials the same way), so a sum's bits depend only on which thread held which value:
// the deterministic alternative to atomicAdd. Included by .cu files only.
#include <cuda_runtime.h>

namespace mixprec::kernels::cuda {

constexpr unsigned kFullWarp = 0xffffffffu;

/// The sum of v over the 32 lanes of the calling warp, valid in lane 0. Every lane must call it.
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFullWarp, v, offset);
  return v;
}

/// The sum of v over the block, valid in thread 0. Every thread must call it (it synchronises);
/// blockDim.x must be a multiple of 32, at most 1024.
__device__ inline float block_sum(float v) {
  __shared__ float partial[32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.0f;
  if (warp == 0) total = warp_sum(lane < blockDim.x / 32 ? partial[lane] : 0.0f);
  __syncthreads();  // the next call may overwrite partial
  return total;
}

}  // namespace mixprec::kernels::cuda
