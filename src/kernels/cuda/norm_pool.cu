// The fused batch norm + ReLU + max pool on the GPU, as the composition of this backend's own
// batch norm and pooling kernels through device scratch from the caching allocator: the values
// are the unfused kernels' (the reference's) and the op keeps the fused one's memory (x and the
// pooled output only). The backward recomputes the normalised activation and the argmax, two
// passes the unfused ops do not make; a one-pass kernel like the CPU's would drop them.
#include <cstdint>

#include "kernels/conv.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/norm.h"

namespace mixprec::kernels::cuda {

void batch_norm_relu_max_pool2d(const Pool2dDesc& d, const void* x, const float* weight,
                                const float* bias, float eps, bool training, float* mean,
                                float* var, void* y) {
  const char* op = "batch_norm_relu_max_pool2d";
  detail::check_batch_norm_pool_args(op, d, eps, training);
  const auto full = static_cast<std::size_t>(d.n * d.c * d.h * d.w);
  Scratch normed(full * size_of(d.dtype), op);
  batch_norm_forward(x, d.dtype, detail::batch_norm_dims_of(d), weight, bias, eps, training, mean,
                     var, normed.as<void>(), d.dtype, nullptr, true);
  max_pool2d(d, normed.as<void>(), y, nullptr);
}

void batch_norm_relu_max_pool2d_backward(const Pool2dDesc& d, const void* x, const void* dy,
                                         const float* mean, const float* var, float eps,
                                         const float* weight, const float* bias, bool training,
                                         void* dx, float* dweight, float* dbias) {
  const char* op = "batch_norm_relu_max_pool2d_backward";
  detail::check_batch_norm_pool_args(op, d, eps, training);
  const BatchNormDims dims = detail::batch_norm_dims_of(d);
  const auto full = static_cast<std::size_t>(d.n * d.c * d.h * d.w);
  const auto pooled = static_cast<std::size_t>(d.n * d.c * d.out_h() * d.out_w());
  const std::size_t bytes = size_of(d.dtype);
  Scratch normed(full * bytes, op), dnormed(full * bytes, op), out(pooled * bytes, op);
  Scratch argmax(pooled * sizeof(std::int32_t), op);
  batch_norm_forward(x, d.dtype, dims, weight, bias, eps, false, const_cast<float*>(mean),
                     const_cast<float*>(var), normed.as<void>(), d.dtype, nullptr, true);
  max_pool2d(d, normed.as<void>(), out.as<void>(), argmax.as<std::int32_t>());
  max_pool2d_backward(d, dy, argmax.as<std::int32_t>(), dnormed.as<void>());
  batch_norm_backward(x, d.dtype, dnormed.as<void>(), d.dtype, dims, mean, var, eps, weight,
                      training, dx, d.dtype, dweight, dbias, normed.as<void>(), nullptr);
}

}  // namespace mixprec::kernels::cuda
