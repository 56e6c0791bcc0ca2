// The fused batch norm + ReLU + max pool on the GPU, as the composition of this backend's own
// batch norm and pooling kernels through device scratch from the caching allocator, with the
// pool's int32 argmax kept as the op's window-local bytes (kernels/spec/pool_math.h converts).
// The values are the unfused kernels' (the reference's) and the op keeps the fused one's memory
// (x, the pooled output and a byte per pooled value); a one-pass kernel like the CPU's would
// also drop the full-size scratch traffic.
#include <cstdint>

#include "kernels/conv.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/norm.h"
#include "kernels/spec/pool_math.h"

namespace mixprec::kernels::cuda {
namespace {

__global__ void window_indices_kernel(Pool2dDesc d, std::int64_t total, const std::int32_t* plane,
                                      std::uint8_t* window) {
  MIXPREC_GRID_STRIDE(i, total) { window[i] = pool::window_index_of(d, i, plane[i]); }
}

__global__ void plane_indices_kernel(Pool2dDesc d, std::int64_t total, const std::uint8_t* window,
                                     std::int32_t* plane) {
  MIXPREC_GRID_STRIDE(i, total) { plane[i] = pool::plane_index_of(d, i, window[i]); }
}

}  // namespace

void batch_norm_relu_max_pool2d(const Pool2dDesc& d, const void* x, const float* weight,
                                const float* bias, float eps, bool training, float* mean,
                                float* var, void* y, std::uint8_t* argmax) {
  const char* op = "batch_norm_relu_max_pool2d";
  detail::check_batch_norm_pool_args(op, d, eps, training);
  const auto full = static_cast<std::size_t>(d.n * d.c * d.h * d.w);
  const std::int64_t pooled = d.n * d.c * d.out_h() * d.out_w();
  Scratch normed(full * size_of(d.dtype), op);
  Scratch plane(static_cast<std::size_t>(pooled) * sizeof(std::int32_t), op);
  batch_norm_forward(x, d.dtype, detail::batch_norm_dims_of(d), weight, bias, eps, training, mean,
                     var, normed.as<void>(), d.dtype, nullptr, true);
  max_pool2d(d, normed.as<void>(), y, plane.as<std::int32_t>());
  if (argmax == nullptr || pooled == 0) return;
  window_indices_kernel<<<grid(pooled), kThreads, 0, stream()>>>(d, pooled,
                                                                  plane.as<std::int32_t>(), argmax);
  check_launch(op);
}

void batch_norm_relu_max_pool2d_backward(const Pool2dDesc& d, const void* x, const void* y,
                                         const std::uint8_t* argmax, const void* dy,
                                         const float* mean, const float* var, float eps,
                                         const float* weight, bool training, void* dx,
                                         float* dweight, float* dbias) {
  const char* op = "batch_norm_relu_max_pool2d_backward";
  detail::check_batch_norm_pool_args(op, d, eps, training);
  const auto full = static_cast<std::size_t>(d.n * d.c * d.h * d.w);
  const std::int64_t pooled = d.n * d.c * d.out_h() * d.out_w();
  const std::size_t bytes = size_of(d.dtype);
  Scratch plane(static_cast<std::size_t>(pooled) * sizeof(std::int32_t), op);
  Scratch dnormed(full * bytes, op), mask(full * bytes, op);
  if (pooled > 0) {
    plane_indices_kernel<<<grid(pooled), kThreads, 0, stream()>>>(d, pooled, argmax,
                                                                   plane.as<std::int32_t>());
    check_launch(op);
  }
  // Routing y as dy is routed gives the ReLU's mask where it matters (ref/norm_pool_ref.cpp).
  max_pool2d_backward(d, dy, plane.as<std::int32_t>(), dnormed.as<void>());
  max_pool2d_backward(d, y, plane.as<std::int32_t>(), mask.as<void>());
  batch_norm_backward(x, d.dtype, dnormed.as<void>(), d.dtype, detail::batch_norm_dims_of(d), mean,
                      var, eps, weight, training, dx, d.dtype, dweight, dbias, mask.as<void>(),
                      nullptr);
}

}  // namespace mixprec::kernels::cuda
