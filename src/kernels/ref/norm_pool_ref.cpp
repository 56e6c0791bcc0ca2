// Reference batch norm + ReLU + max pooling: the composition it fuses, written with the
// reference kernels (batch_norm_forward with its ReLU into a full-size buffer, then max_pool2d),
// and a backward that recomputes that buffer and the argmax from x and the saved statistics, as
// the fused kernels do, before max_pool2d_backward and batch_norm_backward. So the reference is
// the unfused ops by construction, and a backend's one-pass kernels are tested against it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/norm.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

void detail::check_batch_norm_pool_args(const char* op, const Pool2dDesc& d, float eps,
                                        bool training) {
  validate_pool2d(op, d);
  MIXPREC_CHECK(d.stride == d.kernel && d.padding == 0 && d.h % d.kernel == 0 &&
                    d.w % d.kernel == 0,
                ValueError, op,
                "needs windows that tile the image (stride = kernel, no padding, height and width "
                "multiples of the kernel), got kernel "
                    << d.kernel << ", stride " << d.stride << ", padding " << d.padding << " on "
                    << d.h << "x" << d.w << "; run batch_norm_relu then max_pool2d instead");
  check_batch_norm_args(op, batch_norm_dims_of(d), eps, training);
}

BatchNormDims detail::batch_norm_dims_of(const Pool2dDesc& d) {
  if (d.channels_last) return {d.n * d.h * d.w, d.c, 1};
  return {d.n, d.c, d.h * d.w};
}

namespace ref {
namespace {

std::vector<std::byte> buffer_of(std::int64_t count, DType t) {
  return std::vector<std::byte>(static_cast<std::size_t>(count) * size_of(t));
}

}  // namespace

void batch_norm_relu_max_pool2d(const Pool2dDesc& d, const void* x, const float* weight,
                                const float* bias, float eps, bool training, float* mean,
                                float* var, void* y) {
  detail::check_batch_norm_pool_args("batch_norm_relu_max_pool2d", d, eps, training);
  std::vector<std::byte> normed = buffer_of(d.n * d.c * d.h * d.w, d.dtype);
  batch_norm_forward(x, d.dtype, detail::batch_norm_dims_of(d), weight, bias, eps, training, mean,
                     var, normed.data(), d.dtype, nullptr, true);
  max_pool2d(d, normed.data(), y, nullptr);
}

void batch_norm_relu_max_pool2d_backward(const Pool2dDesc& d, const void* x, const void* dy,
                                         const float* mean, const float* var, float eps,
                                         const float* weight, const float* bias, bool training,
                                         void* dx, float* dweight, float* dbias) {
  detail::check_batch_norm_pool_args("batch_norm_relu_max_pool2d_backward", d, eps, training);
  const BatchNormDims dims = detail::batch_norm_dims_of(d);
  const std::int64_t full = d.n * d.c * d.h * d.w, pooled = d.n * d.c * d.out_h() * d.out_w();
  // The forward's output, recomputed: eval mode with the forward's statistics is the same
  // formula on the same values (batch_norm_forward reads mean and var there, never writes them).
  std::vector<std::byte> normed = buffer_of(full, d.dtype), dnormed = buffer_of(full, d.dtype);
  std::vector<std::byte> out = buffer_of(pooled, d.dtype);
  std::vector<std::int32_t> argmax(static_cast<std::size_t>(pooled));
  batch_norm_forward(x, d.dtype, dims, weight, bias, eps, false, const_cast<float*>(mean),
                     const_cast<float*>(var), normed.data(), d.dtype, nullptr, true);
  max_pool2d(d, normed.data(), out.data(), argmax.data());
  max_pool2d_backward(d, dy, argmax.data(), dnormed.data());
  batch_norm_backward(x, d.dtype, dnormed.data(), d.dtype, dims, mean, var, eps, weight, training,
                      dx, d.dtype, dweight, dbias, normed.data(), nullptr);
}

}  // namespace ref
}  // namespace mixprec::kernels
