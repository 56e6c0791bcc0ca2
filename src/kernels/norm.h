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
#include "kernels/conv.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// Batch-norm view of a contiguous input: [n, c, s] with s = H*W (s = 1 for [N, C]).
struct BatchNormDims {
  std::int64_t n = 0;
  std::int64_t c = 0;
  std::int64_t s = 1;
};

namespace ref {
/// y[n, c, s] = (x - mean[c]) * invstd[c] * weight[c] + bias[c], invstd = 1 / sqrt(var + eps).
/// training: mean/var [c] are outputs (batch mean and biased batch variance over n*s values);
/// otherwise inputs (the running statistics). weight/bias are f32 [c] or null (1 and 0).
/// The epilogue a ResNet puts after its norms, fused: when residual is not null (y's dtype and
/// layout) it is added, and when relu is set ReLU follows: y = relu(r(r(bn(x)) + residual)),
/// each step rounded to y_dtype as the separate batch_norm, add and relu ops round it, so the
/// result is theirs bit for bit (batch_norm_epilogue in norm_math.h: one formula everywhere).
void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype, const void* residual, bool relu);

/// Gradients of batch_norm_forward given dy (same layout as x). mean/var are the ones the
/// forward used. training (batch statistics depend on x):
///   dx = w*invstd * (dy - sum(dy)/M - (x - mean) * invstd^2 * sum(dy * (x - mean))/M);
/// eval: dx = w*invstd * dy. dweight[c] = invstd * sum(dy * (x - mean)), dbias[c] = sum(dy),
/// sums over the M = n*s values of channel c. dx, dweight, dbias may each be null (not wanted).
/// The fused epilogue's backward: when relu_y (the forward's output y, in dy_dtype) is not null,
/// dy is first passed back through the ReLU (relu's own rule: dy where y > 0, else 0) and that
/// gradient g takes dy's place above; when dresidual is not null, g is also written there (the
/// residual's gradient, dy_dtype, dy's layout). Without the epilogue both are null.
void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias, const void* relu_y, void* dresidual);
}  // namespace ref

// ---- batch norm split into reductions and element-wise passes (ops::sync_batch_norm) ----
// The kernels above reduce and apply in one call. A batch split over ranks needs the
// per-channel reductions alone, a combination of every rank's reductions, and then the
// element-wise pass with the combined values: forward, batch_norm_stats then batch_norm_forward
// with training = false and the combined mean and variance; backward,
// batch_norm_backward_reduce then batch_norm_backward_elemt with the combined sums.

namespace ref {
/// Per-channel moments of x in double, to be combined across ranks (Chan et al.'s parallel
/// formula): mean[c] = sum / M and m2[c] = sum over the M = n*s values of (x - mean[c])^2. M may be
/// 0 or 1 (then mean 0 / the value, m2 0). NaN or Inf in a channel make its moments NaN/Inf.
void batch_norm_stats(const void* x, DType x_dtype, BatchNormDims d, double* mean, double* m2);

/// Per-channel gradient sums over the n*s values, in double: sum_dy[c] = sum dy and
/// sum_dy_xmu[c] = sum dy * (x - mean[c]); the reduction batch_norm_backward does.
void batch_norm_backward_reduce(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                                BatchNormDims d, const float* mean, double* sum_dy,
                                double* sum_dy_xmu);

/// dx of training-mode batch norm from gradient sums over `count` values (every rank's):
/// dx = dy * k1 + ((x - mean) * k2 + k3) with k1 = w*invstd, k2 = -k1 * invstd^2 *
/// f32(sum_dy_xmu / count), k3 = -k1 * f32(sum_dy / count): batch_norm_backward's formula, so
/// with this batch's own sums and count = n*s the result is batch_norm_backward's dx bit for bit.
void batch_norm_backward_elemt(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                               BatchNormDims d, const float* mean, const float* var, float eps,
                               const float* weight, const double* sum_dy,
                               const double* sum_dy_xmu, double count, void* dx, DType dx_dtype);

/// Layer norm over rows of `cols` values: y = (x - mean[r]) * rstd[r] * weight[j] + bias[j],
/// rstd = 1 / sqrt(biased var + eps). Writes mean/rstd [rows] (f32, saved for backward);
/// weight/bias are f32 [cols] or null.
void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd);

/// The residual add of a pre-norm transformer fused with the layer norm that follows it:
/// sum = x + delta (each widened to f32, added in f32, rounded once to sum_dtype: the bits of
/// the binary add kernel), then layer_norm_forward of the stored sum values into y, mean and
/// rstd, bit for bit. One pass reads x and delta and writes sum and y, where the add and the
/// norm apart read the sum back (and autocast first widened a 16-bit delta in a pass of its own).
void add_layer_norm_forward(const void* x, DType x_dtype, const void* delta, DType delta_dtype,
                            std::int64_t rows, std::int64_t cols, const float* weight,
                            const float* bias, float eps, void* sum, DType sum_dtype, void* y,
                            DType y_dtype, float* mean, float* rstd);

/// Gradients of layer_norm_forward: with g = dy * weight and xhat = (x - mean) * rstd,
/// dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)); dweight[j] = sum_r dy * xhat,
/// dbias[j] = sum_r dy. dx, dweight, dbias may each be null.
void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias);
}  // namespace ref

// ---- batch norm, ReLU and max pooling in one op (a convnet's conv -> BN -> ReLU -> pool) ----
// The normalised activation between batch norm and the pool is never stored: the forward writes
// the pooled output and each window's argmax as one byte, and the backward routes the pooled
// gradient through them. Against batch_norm_relu then max_pool2d that drops a full-size write and
// two full-size reads in forward, and in backward the pool's full-size gradient and the ReLU
// mask's reads; a CNN keeps x, the pooled output and a byte per pooled value per layer.

namespace ref {
/// batch_norm_forward with its ReLU (no residual) followed by max_pool2d, over disjoint windows
/// that tile the image: d.stride == d.kernel <= 16, d.padding == 0, d.h and d.w multiples of
/// d.kernel. x [n, c, h, w] (d.channels_last: [n, h, w, c]) and y [n, c, h/k, w/k] (likewise)
/// share d.dtype; y is what the two ops write, bit for bit (each value rounded to d.dtype, ReLU'd,
/// then the window's first maximum, a NaN winning). argmax (may be null; laid out as y) gets the
/// row-major index within its window (0 .. k*k - 1) of that maximum. weight, bias, eps,
/// training, mean and var as in batch_norm_forward (training writes the batch statistics, eval
/// reads the running ones).
void batch_norm_relu_max_pool2d(const Pool2dDesc& d, const void* x, const float* weight,
                                const float* bias, float eps, bool training, float* mean,
                                float* var, void* y, std::uint8_t* argmax);
/// Gradients of batch_norm_relu_max_pool2d from dy (the pooled output's gradient, d.dtype) and
/// the forward's y and argmax: dy routed to each window's argmax as max_pool2d_backward routes it
/// (0 + dy), through the ReLU (where y > 0), then batch_norm_backward's formulas: dx (d.dtype,
/// x's layout), dweight, dbias (f32 [c]; each may be null). The unfused ops' gradients up to the
/// order of the f32 sums (an infinite x anywhere still makes its channel's dweight NaN).
void batch_norm_relu_max_pool2d_backward(const Pool2dDesc& d, const void* x, const void* y,
                                         const std::uint8_t* argmax, const void* dy,
                                         const float* mean, const float* var, float eps,
                                         const float* weight, bool training, void* dx,
                                         float* dweight, float* dbias);
}  // namespace ref

namespace detail {
/// The fused batch norm + ReLU + max pool's checks (validate_pool2d's and batch norm's, and
/// windows that tile the image); ValueError/ShapeError naming op.
void check_batch_norm_pool_args(const char* op, const Pool2dDesc& d, float eps, bool training);
/// The batch-norm view of the fused op's x: [n, c, h*w], or [n*h*w, c, 1] channels-last.
BatchNormDims batch_norm_dims_of(const Pool2dDesc& d);
/// Argument checks shared by the reference and the dispatcher (ShapeError/ValueError naming op).
void check_batch_norm_args(const char* op, BatchNormDims d, float eps, bool training);
void check_layer_norm_args(const char* op, std::int64_t rows, std::int64_t cols, float eps);
}  // namespace detail

/// The norm kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_NORM_KERNELS(X) X(batch_norm_forward) X(batch_norm_backward) X(batch_norm_stats) \
  X(batch_norm_backward_reduce) X(batch_norm_backward_elemt) X(layer_norm_forward) \
  X(add_layer_norm_forward) X(layer_norm_backward) X(batch_norm_relu_max_pool2d) \
  X(batch_norm_relu_max_pool2d_backward)
MIXPREC_NORM_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
