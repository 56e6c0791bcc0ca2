#pragma once
/// The per-row and per-element formulas of softmax, log-softmax and cross-entropy, written once
/// for the host and a device (MIXPREC_HD): the reference calls them, a device backend compiles
/// them. Every operation is an IEEE f32 operation in the order written (-ffp-contract=off on the
/// host, --fmad=false under nvcc); only exp and log come from each side's own math library.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/spec/host_device.h"

namespace mixprec::kernels::softmax_math {

/// One step of the NaN-propagating row max: the first NaN met stays, else the larger (a tie
/// keeps m).
MIXPREC_HD inline float row_max_step(float m, float v) {
  return (m != m) ? m : (v != v || v > m) ? v : m;
}

/// log_softmax of x in a row with max m and log-sum-exp lse (of the shifted values).
MIXPREC_HD inline float log_softmax_value(float x, float m, float lse) { return (x - m) - lse; }

/// softmax of x in a row with max m and 1 / sum(exp(x - m)) inv.
MIXPREC_HD inline float softmax_value(float x, float m, float inv) {
  return std::exp(x - m) * inv;
}

/// log-softmax backward for one element: dy - exp(y) * sum(dy).
MIXPREC_HD inline float log_softmax_grad(float dy, float y, float sum_dy) {
  return dy - std::exp(y) * sum_dy;
}

/// softmax backward for one element: y * (dy - sum(dy * y)).
MIXPREC_HD inline float softmax_grad(float dy, float y, float sum_dy_y) {
  return y * (dy - sum_dy_y);
}

/// A row's cross-entropy from the target's log-probability and the sum of all log-probabilities,
/// with label smoothing s over cols classes.
MIXPREC_HD inline float cross_entropy_loss(float logp_target, float sum_logp, float s,
                                           std::int64_t cols) {
  return -(1.0f - s) * logp_target - (s / static_cast<float>(cols)) * sum_logp;
}

/// The smoothed target mass s / cols that every class gets.
MIXPREC_HD inline float cross_entropy_off_mass(float s, std::int64_t cols) {
  return s / static_cast<float>(cols);
}

/// dlogits for one class: g * (softmax - q), q = off + (1 - s) at the target, off elsewhere.
MIXPREC_HD inline float cross_entropy_grad(float g, float x, float m, float inv, bool is_target,
                                           float off, float s) {
  const float q = is_target ? off + (1.0f - s) : off;
  return g * (std::exp(x - m) * inv - q);
}

/// Whether two f32 values have the same bits (the fused cross-entropy's backward: the gradient
/// that reached the loss is the one promised). Bits, not ==: -0 is not +0 and a NaN is itself,
/// so "equal" means the saved gradient is exactly the one the node would compute.
MIXPREC_HD inline bool same_bits(float a, float b) {
  std::uint32_t ua = 0, ub = 0;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  return ua == ub;
}

}  // namespace mixprec::kernels::softmax_math
