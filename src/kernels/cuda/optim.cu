// The CUDA fused optimizer updates, one thread per element, each element the reference's own
// per-element functions (kernels/spec/optim_math.h, MIXPREC_HD): std::fma is fma.rn.f32 on the device,
// sqrt and division are IEEE (nvcc's -prec-sqrt=true, -prec-div=true defaults), and
// --fmad=false fuses nothing else, so parameter, master, state and copy get the reference's bits.
// A stochastic write draws element i's bits from random_bits(rng_stream, i) (core/random.h,
// constexpr) in the thread itself, the stream the reference fills its array from; the caller's
// OptimArrays::random is not read, as the reference's entry replaces it too. Deterministic:
// each element is one thread's.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/optim.h"
#include "kernels/spec/optim_math.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::cuda {
namespace {

/// Element i's random bits where write_param rounds stochastically (a 16-bit parameter without
/// a master), else unused.
__device__ inline std::uint32_t random_of(const OptimArrays& a, std::size_t i,
                                          std::uint64_t rng_stream) {
  return a.param_dtype != DType::f32 && a.write == kWriteStochastic
             ? mixprec::random_bits(rng_stream, i)
             : 0u;
}

template <DType GradT>
__global__ void sgd_kernel(OptimArrays a, SgdScalars s, std::int64_t n, std::uint64_t rng_stream) {
  const float m = optim_math::grad_multiplier_of(a);
  MIXPREC_GRID_STRIDE(i, n) {
    const auto e = static_cast<std::size_t>(i);
    optim_math::write_param(a, e, optim_math::sgd_value<GradT>(a, s, e, m),
                            random_of(a, e, rng_stream));
  }
}

template <DType GradT>
__global__ void adam_kernel(OptimArrays a, AdamScalars s, std::int64_t n,
                            std::uint64_t rng_stream) {
  const float m = optim_math::grad_multiplier_of(a);
  MIXPREC_GRID_STRIDE(i, n) {
    const auto e = static_cast<std::size_t>(i);
    optim_math::write_param(a, e, optim_math::adam_value<GradT>(a, s, e, m),
                            random_of(a, e, rng_stream));
  }
}

// ---- multi-tensor updates: one launch per OptimBatch ----

/// Elements one block of a batched launch updates (kThreads threads, 8 elements each): a block
/// never spans two runs, so its run's arrays, dtypes and scalars are uniform across its warps.
constexpr std::int64_t kBatchBlockElements = 8 * kThreads;

/// A batch as the kernel receives it (by value, in the kernel's parameter space): the runs and
/// the blocks of each.
template <class Scalars>
struct BatchLaunch {
  OptimBatch<Scalars> batch;
  BlockPlan<kOptimBatchRuns> plan;
};

/// The update of one element: value by the family's per-element function, for the run's
/// gradient dtype (uniform in a block), written as the single-tensor kernels write it.
template <class Scalars>
__device__ inline void update_element(const OptimArrays& a, const Scalars& s, std::size_t e,
                                      float m, std::uint64_t rng_stream) {
  float value;
  if constexpr (std::is_same_v<Scalars, AdamScalars>) {
    switch (a.grad_dtype) {
      case DType::f32: value = optim_math::adam_value<DType::f32>(a, s, e, m); break;
      case DType::bf16: value = optim_math::adam_value<DType::bf16>(a, s, e, m); break;
      default: value = optim_math::adam_value<DType::f16>(a, s, e, m); break;
    }
  } else {
    switch (a.grad_dtype) {
      case DType::f32: value = optim_math::sgd_value<DType::f32>(a, s, e, m); break;
      case DType::bf16: value = optim_math::sgd_value<DType::bf16>(a, s, e, m); break;
      default: value = optim_math::sgd_value<DType::f16>(a, s, e, m); break;
    }
  }
  optim_math::write_param(a, e, value, random_of(a, e, rng_stream));
}

template <class Scalars>
__global__ void batch_kernel(const __grid_constant__ BatchLaunch<Scalars> l) {
  const int b = static_cast<int>(blockIdx.x);
  const int r = l.plan.run_of(b);
  const OptimRun<Scalars>& run = l.batch.runs[r];
  const float m = optim_math::grad_multiplier_of(run.arrays);
  const auto count = static_cast<std::int64_t>(run.count);
  const std::int64_t begin = (b - l.plan.first_block[r]) * kBatchBlockElements;
  const std::int64_t end = begin + kBatchBlockElements < count ? begin + kBatchBlockElements : count;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    update_element(run.arrays, run.scalars, static_cast<std::size_t>(i), m, run.rng_stream);
  }
}

template <class Scalars>
void launch_batch(const OptimBatch<Scalars>& batch, const char* name) {
  BatchLaunch<Scalars> l;
  l.batch = batch;
  const std::int64_t blocks = l.plan.plan(
      batch.size, [&](int r) { return batch.runs[r].count; }, kBatchBlockElements, name);
  if (blocks == 0) return;
  batch_kernel<Scalars><<<static_cast<unsigned>(blocks), kThreads, 0, stream()>>>(l);
  check_launch(name);
}

}  // namespace

void sgd_update(const OptimArrays& a, const SgdScalars& s, std::size_t n,
                std::uint64_t rng_stream) {
  if (n == 0) return;
  const auto count = static_cast<std::int64_t>(n);
  switch (a.grad_dtype) {
    case DType::f32:
      sgd_kernel<DType::f32><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    case DType::bf16:
      sgd_kernel<DType::bf16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    default:
      sgd_kernel<DType::f16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
  }
  check_launch("sgd_update");
}

void adam_update(const OptimArrays& a, const AdamScalars& s, std::size_t n,
                 std::uint64_t rng_stream) {
  if (n == 0) return;
  const auto count = static_cast<std::int64_t>(n);
  switch (a.grad_dtype) {
    case DType::f32:
      adam_kernel<DType::f32><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    case DType::bf16:
      adam_kernel<DType::bf16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    default:
      adam_kernel<DType::f16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
  }
  check_launch("adam_update");
}

void sgd_update_batch(const SgdBatch& batch) { launch_batch(batch, "sgd_update_batch"); }

void adam_update_batch(const AdamBatch& batch) { launch_batch(batch, "adam_update_batch"); }

}  // namespace mixprec::kernels::cuda
