#pragma once
/// Batch normalisation and layer normalisation on raw contiguous buffers, forward and backward.
/// Statistics (means, variances, the gradient sums) are always computed in f32 or wider from the
/// widened input values, whatever the storage dtype; per-channel / per-feature parameters and
/// statistics are f32 arrays. kernels::ref:: is the spec (double accumulation); kernels::
/// dispatches to the per-channel CPU loops (AVX-512 rows where available).
///
/// Variance: two passes (mean first, then the mean of squared deviations). Unlike the one-pass
/// E[x^2] - E[x]^2 it does not cancel when |mean| >> std, and unlike Welford it needs no division
/// per element; the second pass is nearly free because each channel's data is still in L2.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels {

/// Batch-norm view of a contiguous input: [n, c, s] with s = H*W (s = 1 for [N, C]).
struct BatchNormDims {
  std::int64_t n = 0;
  std::int64_t c = 0;
  std::int64_t s = 1;
};

/// y[n, c, s] = (x - mean[c]) * invstd[c] * weight[c] + bias[c], invstd = 1 / sqrt(var + eps).
/// training: mean/var [c] are outputs (batch mean and biased batch variance over n*s values);
/// otherwise inputs (the running statistics). weight/bias are f32 [c] or null (1 and 0).
void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype);

/// Gradients of batch_norm_forward given dy (same layout as x). mean/var are the ones the
/// forward used. training (batch statistics depend on x):
///   dx = w*invstd * (dy - sum(dy)/M - (x - mean) * invstd^2 * sum(dy * (x - mean))/M);
/// eval: dx = w*invstd * dy. dweight[c] = invstd * sum(dy * (x - mean)), dbias[c] = sum(dy),
/// sums over the M = n*s values of channel c. dx, dweight, dbias may each be null (not wanted).
void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias);

/// Layer norm over rows of `cols` values: y = (x - mean[r]) * rstd[r] * weight[j] + bias[j],
/// rstd = 1 / sqrt(biased var + eps). Writes mean/rstd [rows] (f32, saved for backward);
/// weight/bias are f32 [cols] or null.
void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd);

/// Gradients of layer_norm_forward: with g = dy * weight and xhat = (x - mean) * rstd,
/// dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)); dweight[j] = sum_r dy * xhat,
/// dbias[j] = sum_r dy. dx, dweight, dbias may each be null.
void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias);

/// 1 / sqrt(var + eps) in f32: the one formula every implementation uses, so the reference and
/// the CPU kernels agree on it exactly.
float norm_invstd(float var, float eps);

namespace ref {
void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype);
void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias);
void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd);
void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias);
}  // namespace ref

namespace cpu {
void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype);
void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias);
void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd);
void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias);
}  // namespace cpu

namespace detail {
/// Argument checks shared by the reference and the dispatcher (ShapeError/ValueError naming op).
void check_batch_norm_args(const char* op, BatchNormDims d, float eps, bool training);
void check_layer_norm_args(const char* op, std::int64_t rows, std::int64_t cols, float eps);
}  // namespace detail

}  // namespace mixprec::kernels
