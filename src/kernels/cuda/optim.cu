// The CUDA fused optimizer updates, one thread per element, each element the reference's own
// per-element functions (kernels/optim_math.h, MIXPREC_HD): std::fma is fma.rn.f32 on the device,
// sqrt and division are IEEE (nvcc's -prec-sqrt=true, -prec-div=true defaults), and
// --fmad=false fuses nothing else, so parameter, master, state and copy get the reference's bits.
// A stochastic write draws element i's bits from random_bits(rng_stream, i) (core/random.h,
// constexpr) in the thread itself, the stream the reference fills its array from; the caller's
// OptimArrays::random is not read, as the reference's entry replaces it too. Deterministic:
// each element is one thread's.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/optim.h"
#include "kernels/optim_math.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::cuda {
namespace {

/// Element i's random bits where write_param rounds stochastically (a 16-bit parameter without
/// a master), else unused.
__device__ inline std::uint32_t random_of(const OptimArrays& a, std::size_t i,
                                          std::uint64_t rng_stream) {
  return a.param_dtype != kOptimF32 && a.write == kWriteStochastic
             ? mixprec::random_bits(rng_stream, i)
             : 0u;
}

template <int GradT>
__global__ void sgd_kernel(OptimArrays a, SgdScalars s, std::int64_t n, std::uint64_t rng_stream) {
  MIXPREC_GRID_STRIDE(i, n) {
    const auto e = static_cast<std::size_t>(i);
    optim_math::write_param(a, e, optim_math::sgd_value<GradT>(a, s, e),
                            random_of(a, e, rng_stream));
  }
}

template <int GradT>
__global__ void adam_kernel(OptimArrays a, AdamScalars s, std::int64_t n,
                            std::uint64_t rng_stream) {
  MIXPREC_GRID_STRIDE(i, n) {
    const auto e = static_cast<std::size_t>(i);
    optim_math::write_param(a, e, optim_math::adam_value<GradT>(a, s, e),
                            random_of(a, e, rng_stream));
  }
}

}  // namespace

void sgd_update(const OptimArrays& a, const SgdScalars& s, std::size_t n,
                std::uint64_t rng_stream) {
  if (n == 0) return;
  const auto count = static_cast<std::int64_t>(n);
  switch (a.grad_dtype) {
    case kOptimF32:
      sgd_kernel<kOptimF32><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    case kOptimBF16:
      sgd_kernel<kOptimBF16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    default:
      sgd_kernel<kOptimF16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
  }
  check_launch("sgd_update");
}

void adam_update(const OptimArrays& a, const AdamScalars& s, std::size_t n,
                 std::uint64_t rng_stream) {
  if (n == 0) return;
  const auto count = static_cast<std::int64_t>(n);
  switch (a.grad_dtype) {
    case kOptimF32:
      adam_kernel<kOptimF32><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    case kOptimBF16:
      adam_kernel<kOptimBF16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
    default:
      adam_kernel<kOptimF16><<<grid(count), kThreads, 0, stream()>>>(a, s, count, rng_stream);
      break;
  }
  check_launch("adam_update");
}

}  // namespace mixprec::kernels::cuda
