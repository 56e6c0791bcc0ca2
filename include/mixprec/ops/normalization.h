#pragma once
/// Differentiable normalisation: batch norm and layer norm. Statistics are always computed in
/// f32 (from the widened input values), whatever the input dtype.
#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// Batch normalisation of x [N, C, H, W] or [N, C] (any [N, C, ...]) per channel C, output in
/// x's dtype (f32/bf16/f16). training: normalises with the batch mean and biased batch variance
/// (needs more than one value per channel, else ValueError) and, if running_mean/running_var are
/// defined, updates them in place like PyTorch (running = (1 - momentum) * running + momentum *
/// batch, the unbiased variance for running_var) and bumps their version. Eval: normalises with
/// running_mean/running_var (required). Both are f32 [C] (DTypeError/ShapeError otherwise).
/// weight/bias [C] are optional (undefined: no affine) and may be any dtype; gradients flow to
/// x, weight and bias in both modes. Autocast: pass-through (computes in f32 inside).
Tensor batch_norm(const Tensor& x, Tensor& running_mean, Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training,
                  float momentum = 0.1f, float eps = 1e-5f);

/// relu(batch_norm(x) + residual), or relu(batch_norm(x)) with residual undefined: the end of
/// a convnet's conv-BN-ReLU and of a ResNet block, in one pass over the activations each way
/// instead of three. Bit for bit the ops one after the other, forward and gradients (x, weight,
/// bias, residual), running statistics included; it saves the output (the ReLU's mask) and x,
/// as the separate ops do. A residual of another shape or dtype runs as the separate ops.
Tensor batch_norm_relu(const Tensor& x, Tensor& running_mean, Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training,
                       float momentum = 0.1f, float eps = 1e-5f,
                       const Tensor& residual = Tensor());

/// max_pool2d(relu(batch_norm(x)), kernel) over windows that tile the image (stride = kernel,
/// no padding; H and W multiples of kernel, else ValueError): a convnet's BN-ReLU-pool in one
/// op, whose forward writes only the pooled output and whose backward recomputes the windows
/// from x and the saved statistics. It saves x and the statistics only (no activation, argmax
/// or ReLU mask). The output, its dtype and layout (x's) and the running statistics are the
/// separate ops' bits; the gradients are theirs up to the order of the f32 gradient sums.
/// x [N, C, H, W] in f32/bf16/f16, the rest as batch_norm. nn::Sequential runs it for a
/// BatchNorm2d, ReLU, MaxPool2d(k) of channels-last activations.
Tensor batch_norm_relu_max_pool2d(const Tensor& x, Tensor& running_mean, Tensor& running_var,
                                  const Tensor& weight, const Tensor& bias, bool training,
                                  std::int64_t kernel, float momentum = 0.1f, float eps = 1e-5f);

/// Layer normalisation of x over its last `normalized_dims` dimensions (1 <= normalized_dims
/// <= x.dim()): y = (x - mean) / sqrt(var + eps) * weight + bias, with weight/bias (optional,
/// any dtype) shaped like those dimensions. Statistics and normalisation are computed in f32
/// from any input dtype; the output is in x's dtype, or under runtime::Autocast in the region's
/// dtype, rounded once (fp32_to_lower: what the next GEMM reads, with no cast between).
Tensor layer_norm(const Tensor& x, std::int64_t normalized_dims, const Tensor& weight,
                  const Tensor& bias, float eps = 1e-5f);

/// What add_layer_norm returns: the residual stream's new value and its layer norm.
struct ResidualNorm {
  Tensor sum;
  Tensor normalized;
};

/// The pre-norm transformer's residual step in one pass: sum = x + delta and normalized =
/// layer_norm(sum, normalized_dims, weight, bias, eps), with the values, dtypes and gradients
/// of add() followed by layer_norm() (bit for bit), but one kernel that reads x and delta once
/// and writes both outputs (the norm does not read the sum back). x and delta of different
/// shapes are broadcast by add() and normalised apart.
ResidualNorm add_layer_norm(const Tensor& x, const Tensor& delta, std::int64_t normalized_dims,
                            const Tensor& weight, const Tensor& bias, float eps = 1e-5f);

}  // namespace mixprec
