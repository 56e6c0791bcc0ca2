// The CUDA EMA-of-weights update, one thread per element: the reference's expression
// shadow += a * (p - shadow) in f32, three roundings (--fmad=false keeps a * d + s unfused, as
// -ffp-contract=off does on the host), so the shadow gets the reference's bits. Elements are
// independent: deterministic.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/ema.h"

namespace mixprec::kernels::cuda {
namespace {

template <class T>
__global__ void ema_update_kernel(const T* param, float* shadow, std::int64_t n, float a) {
  MIXPREC_GRID_STRIDE(i, n) shadow[i] += a * (static_cast<float>(param[i]) - shadow[i]);
}

}  // namespace

void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a) {
  MIXPREC_CHECK(n >= 0, ShapeError, "ema_update", "negative element count " << n);
  dispatch(param_dtype, [&](auto t) {
    using T = decltype(t);
    if (n == 0) return;
    ema_update_kernel<T><<<grid(n), kThreads, 0, stream()>>>(static_cast<const T*>(param), shadow,
                                                             n, a);
    check_launch("ema_update");
  });
}

}  // namespace mixprec::kernels::cuda
