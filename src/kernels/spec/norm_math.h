#pragma once
/// The per-channel and per-element formulas of batch norm and layer norm, written once for the
/// host and a device (MIXPREC_HD): the reference calls them, the CPU kernels call the
/// per-channel ones, a device backend compiles all of them. Every operation is an IEEE f32 (or
/// double where written) operation in the order written (-ffp-contract=off on the host,
/// --fmad=false under nvcc), so whoever calls them gets the reference's bits.
#include <cmath>

#include "kernels/spec/elementwise_math.h"  // add and relu: the epilogue is their formulas
#include "kernels/spec/host_device.h"

namespace mixprec::kernels {

/// 1 / sqrt(var + eps) in f32: the one formula every implementation uses, so the reference and
/// the CPU kernels agree on it exactly.
MIXPREC_HD inline float norm_invstd(float var, float eps) { return 1.0f / std::sqrt(var + eps); }

/// The per-channel coefficients of the training-mode batch-norm backward, dx = dy * k1 +
/// ((x - mean) * k2 + k3), from the gradient sums over `count` values; one formula for every
/// implementation (fused or split), so they agree on it exactly.
struct BatchNormGradCoefs {
  float k1, k2, k3;
};
MIXPREC_HD inline BatchNormGradCoefs batch_norm_grad_coefs(float var, float eps, float weight,
                                                           double sum_dy, double sum_dy_xmu,
                                                           double count, bool training) {
  const float invstd = norm_invstd(var, eps);
  const float k1 = weight * invstd;
  if (!training) return {k1, 0.0f, 0.0f};
  return {k1, -k1 * invstd * invstd * static_cast<float>(sum_dy_xmu / count),
          -k1 * static_cast<float>(sum_dy / count)};
}

namespace norm_math {

/// Batch norm's output for one value of a channel with statistics mean, invstd and affine w, b.
MIXPREC_HD inline float batch_norm_apply(float v, float mean, float invstd, float w, float b) {
  return (v - mean) * (invstd * w) + b;
}

/// The epilogue fused after batch norm for one value: z is batch_norm_apply's result, `round`
/// rounds a float to y's dtype as a store would, r is the residual (widened; ignored without
/// one). Each step is rounded where the separate batch_norm, add and relu ops round it, so the
/// fused output is theirs bit for bit.
template <class Round>
MIXPREC_HD inline float batch_norm_epilogue(float z, const Round& round, bool has_residual,
                                            float r, bool relu) {
  float v = round(z);
  if (has_residual) v = round(math::add::apply(v, r));
  return relu ? math::relu::forward(v) : v;
}

/// The gradient batch norm takes under a fused ReLU, from the fused output y: relu's own rule
/// applied to y (y > 0 exactly where relu's input was > 0, NaN and -0 included), so the
/// backward needs no copy of relu's input.
MIXPREC_HD inline float batch_norm_relu_grad(float y, float dy) {
  return math::relu::backward(y, dy);
}

/// Batch norm's dx for one value from its dy (g), x - mean (xmu) and the channel's coefficients.
MIXPREC_HD inline float batch_norm_grad_apply(float g, float xmu, BatchNormGradCoefs k) {
  return g * k.k1 + xmu * k.k2 + k.k3;
}

/// The normalised value (x - mean) * rstd of layer norm.
MIXPREC_HD inline float layer_norm_xhat(float v, float mean, float rstd) {
  return (v - mean) * rstd;
}

/// Layer norm's output from the normalised value and feature j's affine w, b.
MIXPREC_HD inline float layer_norm_apply(float xhat, float w, float b) { return xhat * w + b; }

/// Layer norm's dx for one value: g = dy * weight, a = mean_j(g), b = mean_j(g * xhat).
MIXPREC_HD inline float layer_norm_grad_apply(float rstd, float g, float a, float xhat,
                                              float b) {
  return rstd * (g - a - xhat * b);
}

}  // namespace norm_math
}  // namespace mixprec::kernels
