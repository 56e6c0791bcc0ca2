// The CUDA fused gradient unscale: each element the reference's own step
// (kernels/spec/unscale_math.h, MIXPREC_HD), in place, in a grid-stride loop. The verdict and amax
// stay in device memory, as the contract says:
//  - found_inf: a block that saw an Inf/NaN input or output writes 1.0f to it (every writer
//    writes the same value, and nothing else writes it: the reference's "set to 1, else left
//    alone", deterministic);
//  - amax: each block's largest finite |out| goes to scratch (a fixed tree per block), then one
//    block takes the largest of those and raises *amax to it with the reference's std::max.
//    The reference folds std::max(a, |y|) from the prior *amax over every element; over
//    non-negative non-NaN values that is std::max(prior, the largest |y|, +0 if none), which
//    no order of comparisons can change (-0 and +0 compare equal and the prior is kept on a
//    tie, as in the fold).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/unscale.h"
#include "kernels/spec/unscale_math.h"

namespace mixprec::kernels::cuda {
namespace {

/// Blocks of the unscale pass: enough to fill an H100 (132 SMs of 2048 threads), few enough
/// that one block combines their amax partials quickly.
constexpr unsigned kMaxUnscaleBlocks = 1024;

/// b if a < b, else a: std::max's choice, so a tie keeps the left operand as the reference's.
__device__ inline float max_of(float a, float b) { return a < b ? b : a; }

/// The largest v over the block's threads, for non-negative non-NaN v; every thread must call
/// it. The result is valid in thread 0.
__device__ float block_max(float v) {
  __shared__ float warp_max[kThreads / 32];
  for (int step = 16; step > 0; step /= 2) v = max_of(v, __shfl_down_sync(0xffffffffu, v, step));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_max[lane] : 0.0f;
    for (int step = 16; step > 0; step /= 2) v = max_of(v, __shfl_down_sync(0xffffffffu, v, step));
  }
  return v;
}

/// kDType: DType::f32, DType::bf16, or DType::f16 for every other code (the reference's
/// reading of dtype).
template <DType kDType, bool kAmax>
__global__ void unscale_kernel(void* data, std::int64_t n, float inv, float* found_inf,
                               float* block_amax) {
  bool found = false;
  float a = 0.0f;  // the largest finite |y| this thread saw; +0 if none
  MIXPREC_GRID_STRIDE(i, n) {
    float y;
    if constexpr (kDType == DType::f32) {
      float* p = static_cast<float*>(data);
      const float x = p[i];
      y = x * inv;
      found |= unscale_math::non_finite(x, y);
      p[i] = y;
    } else {
      std::uint16_t* p = static_cast<std::uint16_t*>(data);
      const unscale_math::Unscaled16 u =
          unscale_math::unscale_16bit(p[i], inv, kDType == DType::bf16);
      y = u.y;
      found |= unscale_math::non_finite(u.x, u.y);
      p[i] = u.bits;
    }
    if constexpr (kAmax) a = unscale_math::raise_amax(a, y);
  }
  if (__syncthreads_or(found) != 0 && threadIdx.x == 0) *found_inf = 1.0f;
  if constexpr (kAmax) {
    const float m = block_max(a);
    if (threadIdx.x == 0) block_amax[blockIdx.x] = m;
  }
}

/// One block: *amax = std::max(*amax, the largest of the blocks' partials).
__global__ void combine_amax_kernel(const float* block_amax, unsigned blocks, float* amax) {
  float m = 0.0f;
  for (unsigned j = threadIdx.x; j < blocks; j += blockDim.x) m = max_of(m, block_amax[j]);
  m = block_max(m);
  if (threadIdx.x == 0) *amax = max_of(*amax, m);
}

template <DType kDType>
void launch_unscale(void* data, std::int64_t n, float inv, float* found_inf, float* amax) {
  const unsigned blocks = std::min(grid(n).x, kMaxUnscaleBlocks);
  if (amax == nullptr) {
    unscale_kernel<kDType, false><<<blocks, kThreads, 0, stream()>>>(data, n, inv, found_inf,
                                                                     nullptr);
    check_launch("unscale");
    return;
  }
  Scratch partials(blocks * sizeof(float));
  unscale_kernel<kDType, true><<<blocks, kThreads, 0, stream()>>>(data, n, inv, found_inf,
                                                                  partials.as<float>());
  check_launch("unscale");
  combine_amax_kernel<<<1, kThreads, 0, stream()>>>(partials.as<float>(), blocks, amax);
  check_launch("unscale (amax)");
}

// ---- multi-tensor: one launch per UnscaleBatch ----

/// Elements one block of a batched launch unscales.
constexpr std::int64_t kBatchBlockElements = 16 * kThreads;

struct UnscaleLaunch {
  UnscaleBatch batch;
  BlockPlan<kUnscaleBatchRuns> plan;
};

/// Each block unscales one chunk of one run (its dtype uniform in the block); the flag is
/// written as unscale_kernel writes it, and each block raises *amax to its own largest |y| with
/// an integer atomicMax: non-negative, non-NaN floats order as their bit patterns do as signed
/// integers, and a max is order-free, so the result is deterministic and the reference's (up to
/// the sign of a zero amax: the reference keeps a prior -0 over a +0, atomicMax takes +0).
template <bool kAmax>
__global__ void unscale_batch_kernel(const __grid_constant__ UnscaleLaunch l) {
  const int b = static_cast<int>(blockIdx.x);
  const int r = l.plan.run_of(b);
  const UnscaleRun& run = l.batch.runs[r];
  const auto count = static_cast<std::int64_t>(run.count);
  const std::int64_t begin = (b - l.plan.first_block[r]) * kBatchBlockElements;
  const std::int64_t end = begin + kBatchBlockElements < count ? begin + kBatchBlockElements : count;
  const float inv = l.batch.inv;
  bool found = false;
  float a = 0.0f;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float y;
    if (run.dtype == DType::f32) {
      float* p = static_cast<float*>(run.data);
      const float x = p[i];
      y = x * inv;
      found |= unscale_math::non_finite(x, y);
      p[i] = y;
    } else {
      std::uint16_t* p = static_cast<std::uint16_t*>(run.data);
      const unscale_math::Unscaled16 u =
          unscale_math::unscale_16bit(p[i], inv, run.dtype == DType::bf16);
      y = u.y;
      found |= unscale_math::non_finite(u.x, u.y);
      p[i] = u.bits;
    }
    if constexpr (kAmax) a = unscale_math::raise_amax(a, y);
  }
  if (__syncthreads_or(found) != 0 && threadIdx.x == 0) *l.batch.found_inf = 1.0f;
  if constexpr (kAmax) {
    const float m = block_max(a);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(l.batch.amax), __float_as_int(m));
  }
}

}  // namespace

void unscale_batch(const UnscaleBatch& batch) {
  MIXPREC_ASSERT(batch.found_inf != nullptr);  // the contract (unscale.h): one flag, never null
  UnscaleLaunch l;
  l.batch = batch;
  const std::int64_t blocks = l.plan.plan(
      batch.size, [&](int r) { return batch.runs[r].count; }, kBatchBlockElements, "unscale_batch");
  if (blocks == 0) return;
  const auto grid_size = static_cast<unsigned>(blocks);
  if (batch.amax != nullptr) {
    unscale_batch_kernel<true><<<grid_size, kThreads, 0, stream()>>>(l);
  } else {
    unscale_batch_kernel<false><<<grid_size, kThreads, 0, stream()>>>(l);
  }
  check_launch("unscale_batch");
}

void unscale(void* data, DType dtype, std::size_t n, float inv, float* found_inf, float* amax) {
  MIXPREC_ASSERT(found_inf != nullptr);  // the contract (unscale.h): one flag, never null
  if (n == 0) return;
  const auto count = static_cast<std::int64_t>(n);
  switch (dtype) {
    case DType::f32: launch_unscale<DType::f32>(data, count, inv, found_inf, amax); break;
    case DType::bf16: launch_unscale<DType::bf16>(data, count, inv, found_inf, amax); break;
    default: launch_unscale<DType::f16>(data, count, inv, found_inf, amax); break;
  }
}

}  // namespace mixprec::kernels::cuda
