// Reference batch norm + ReLU + max pooling: the composition it fuses, written with the
// reference kernels (batch_norm_forward with its ReLU into a full-size buffer, then max_pool2d,
// whose argmax is kept as window-local bytes), and a backward through max_pool2d_backward and
// batch_norm_backward. So the reference is the unfused ops by construction, and a backend's
// one-pass kernels are tested against it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/norm.h"
#include "kernels/spec/pool_math.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

void detail::check_batch_norm_pool_args(const char* op, const Pool2dDesc& d, float eps,
                                        bool training) {
  validate_pool2d(op, d);
  MIXPREC_CHECK(d.stride == d.kernel && d.padding == 0 && d.h % d.kernel == 0 &&
                    d.w % d.kernel == 0 && d.kernel <= 16,
                ValueError, op,
                "needs windows that tile the image (stride = kernel <= 16, no padding, height and "
                "width multiples of the kernel), got kernel "
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
                                float* var, void* y, std::uint8_t* argmax) {
  detail::check_batch_norm_pool_args("batch_norm_relu_max_pool2d", d, eps, training);
  const std::int64_t pooled = d.n * d.c * d.out_h() * d.out_w();
  std::vector<std::byte> normed = buffer_of(d.n * d.c * d.h * d.w, d.dtype);
  std::vector<std::int32_t> plane(static_cast<std::size_t>(pooled));
  batch_norm_forward(x, d.dtype, detail::batch_norm_dims_of(d), weight, bias, eps, training, mean,
                     var, normed.data(), d.dtype, nullptr, true);
  max_pool2d(d, normed.data(), y, plane.data());
  if (argmax == nullptr) return;
  for (std::int64_t i = 0; i < pooled; ++i) {
    argmax[i] = pool::window_index_of(d, i, plane[static_cast<std::size_t>(i)]);
  }
}

void batch_norm_relu_max_pool2d_backward(const Pool2dDesc& d, const void* x, const void* y,
                                         const std::uint8_t* argmax, const void* dy,
                                         const float* mean, const float* var, float eps,
                                         const float* weight, bool training, void* dx,
                                         float* dweight, float* dbias) {
  detail::check_batch_norm_pool_args("batch_norm_relu_max_pool2d_backward", d, eps, training);
  const std::int64_t full = d.n * d.c * d.h * d.w, pooled = d.n * d.c * d.out_h() * d.out_w();
  std::vector<std::int32_t> plane(static_cast<std::size_t>(pooled));
  for (std::int64_t i = 0; i < pooled; ++i) {
    plane[static_cast<std::size_t>(i)] = pool::plane_index_of(d, i, argmax[i]);
  }
  // The pool's backward routes dy to the argmax; routing y the same way gives the ReLU's mask
  // where it matters (y > 0 at the argmax; elsewhere the gradient is 0 whatever the mask says).
  std::vector<std::byte> dnormed = buffer_of(full, d.dtype), mask = buffer_of(full, d.dtype);
  max_pool2d_backward(d, dy, plane.data(), dnormed.data());
  max_pool2d_backward(d, y, plane.data(), mask.data());
  batch_norm_backward(x, d.dtype, dnormed.data(), d.dtype, detail::batch_norm_dims_of(d), mean,
                      var, eps, weight, training, dx, d.dtype, dweight, dbias, mask.data(),
                      nullptr);
}

}  // namespace ref
}  // namespace mixprec::kernels
