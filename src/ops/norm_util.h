#pragma once
// Private helpers of batch_norm (ops/norm_ops.cpp) shared with the synchronised batch norm
// (ops/sync_batchnorm_ops.cpp): argument checks, f32 copies of per-channel parameters, the running
// statistics update. One copy of each, so the two ops cannot drift apart.
#include <cstdint>
#include <vector>

#include "kernels/norm.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::ops::detail {

/// An optional parameter as a fresh contiguous f32 copy on its device (undefined when
/// undefined): what the norm kernels read, whatever the parameter's dtype.
Tensor f32_copy(const Tensor& t);
/// A contiguous f32 [n] tensor on the current device, for statistics and parameter gradients the
/// kernels write; undefined when `wanted` is false.
Tensor f32_buffer(std::int64_t n, bool wanted = true);
inline float* data_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

/// A gradient of a parameter, in the parameter's dtype and shape.
Tensor param_grad(const std::vector<float>& g, const Shape& shape, DType dtype);
/// The same from the kernel's f32 [n] gradient on the device (undefined stays undefined).
Tensor param_grad(const Tensor& g, const Shape& shape, DType dtype);

/// What backward needs to know of an optional parameter once its values are copied.
struct ParamInfo {
  bool defined = false;
  Shape shape;
  DType dtype = DType::f32;
  static ParamInfo of(const Tensor& t) {
    return t.defined() ? ParamInfo{true, t.shape(), t.dtype()} : ParamInfo{};
  }
};

/// A running-statistics buffer, if defined, must be f32 [c] and contiguous (DTypeError,
/// ShapeError, ValueError naming op and `what`).
void check_running(const char* op, const Tensor& t, std::int64_t c, const char* what);

/// Every argument check of batch_norm except "more than one value per channel" (which the
/// synchronised op applies to the global batch): x [N, C, ...], weight/bias [C] when defined,
/// the running statistics, momentum and eps. Returns x's [n, c, s] view.
kernels::BatchNormDims check_batch_norm_args(const char* op, const Tensor& x,
                                             const Tensor& running_mean,
                                             const Tensor& running_var, const Tensor& weight,
                                             const Tensor& bias, bool training, float momentum,
                                             float eps);

/// batch_norm's inputs as its kernels take them: x, weight and bias through the op's autocast
/// policy, every argument checked (check_batch_norm_args), and x's [n, c, s] view.
struct BatchNormInputs {
  Tensor x, weight, bias;
  kernels::BatchNormDims d;
};
BatchNormInputs prepare_batch_norm(const char* op, const Tensor& x, const Tensor& running_mean,
                                   const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                                   bool training, float momentum, float eps);

/// running += momentum * (batch * factor - running) in f32 on the device (the ema_update kernel;
/// batch * factor rounded once), in place; bumps the version. factor n / (n - 1) turns a biased
/// batch variance into the unbiased one.
void update_running(Tensor& running, const Tensor& batch, double factor, float momentum);


}  // namespace mixprec::ops::detail
