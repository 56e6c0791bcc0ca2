#pragma once
/// The per-element optimizer updates of optim.h, written once: the reference loops
/// (ref/optim_ref.cpp) call these functions element by element, and the CUDA kernels compile the
/// same functions (MIXPREC_HD), so both give the same bits. Each step is one correctly rounded
/// IEEE operation (std::fma, *, /, sqrt) and no expression has the form a * b + c, so neither
/// the host's -ffp-contract=off nor nvcc's --fmad=false is even needed for that; on the device
/// std::fma is fma.rn.f32, and sqrt and division are IEEE (nvcc's default -prec-sqrt=true,
/// -prec-div=true). Kept out of optim.h, which the Highway kernels include (ODR safety).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/spec/host_device.h"
#include "kernels/optim.h"
#include "mixprec/core/stochastic_rounding.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels::optim_math {

/// Gradient element i widened to f32 (exact).
template <DType GradT>
MIXPREC_HD inline float load_grad(const void* grad, std::size_t i) {
  if constexpr (GradT == DType::f32) {
    return static_cast<const float*>(grad)[i];
  } else if constexpr (GradT == DType::bf16) {
    return bf16_bits_to_f32(static_cast<const std::uint16_t*>(grad)[i]);
  } else {
    return f16_bits_to_f32(static_cast<const std::uint16_t*>(grad)[i]);
  }
}

/// The multiplier every gradient element of `a` takes: *a.grad_multiplier, or 1 without one.
MIXPREC_HD inline float grad_multiplier_of(const OptimArrays& a) {
  return a.grad_multiplier != nullptr ? *a.grad_multiplier : 1.0f;
}

/// Gradient element i as the update uses it: widened to f32 and, for a multiplier m other than
/// 1, multiplied by m (one f32 rounding) and rounded to the gradient's dtype, the bits a pass of
/// its own would have stored in the gradient (optim.h, OptimArrays::grad_multiplier).
template <DType GradT>
MIXPREC_HD inline float grad_value(const void* grad, std::size_t i, float m) {
  const float g = load_grad<GradT>(grad, i);
  if (m == 1.0f) return g;
  const float scaled = g * m;
  if constexpr (GradT == DType::f32) {
    return scaled;
  } else if constexpr (GradT == DType::bf16) {
    return bf16_bits_to_f32(f32_to_bf16_bits(scaled));
  } else {
    return f16_bits_to_f32(f32_to_f16_bits(scaled));
  }
}

/// The f32 value the update starts from: the master if there is one, else the parameter.
MIXPREC_HD inline float read_param(const OptimArrays& a, std::size_t i) {
  if (a.write == kWriteMaster) return a.master[i];
  if (a.param_dtype == DType::f32) return static_cast<const float*>(a.param)[i];
  const std::uint16_t bits = static_cast<const std::uint16_t*>(a.param)[i];
  return a.param_dtype == DType::bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

/// Stores the new value: in place (f32, plus the RNE 16-bit copy if any), to the master plus its
/// RNE 16-bit parameter, or with stochastic rounding from `random`, this element's 32 random
/// bits (read for kWriteStochastic only).
MIXPREC_HD inline void write_param(const OptimArrays& a, std::size_t i, float value,
                                   std::uint32_t random) {
  if (a.param_dtype == DType::f32) {
    static_cast<float*>(a.param)[i] = value;
    if (a.copy != nullptr) {
      static_cast<std::uint16_t*>(a.copy)[i] =
          a.copy_dtype == DType::bf16 ? f32_to_bf16_bits(value) : f32_to_f16_bits(value);
    }
    return;
  }
  auto* bits = static_cast<std::uint16_t*>(a.param);
  const bool bf16 = a.param_dtype == DType::bf16;
  if (a.write == kWriteStochastic) {
    bits[i] = bf16 ? f32_to_bf16_bits_stochastic(value, random)
                   : f32_to_f16_bits_stochastic(value, random);
    return;
  }
  if (a.write == kWriteMaster) a.master[i] = value;
  bits[i] = bf16 ? f32_to_bf16_bits(value) : f32_to_f16_bits(value);
}

/// SGD for element i with gradient multiplier mult (grad_multiplier_of(a)): updates the momentum
/// buffer (state0[i], when momentum != 0) and returns the new parameter value (for write_param).
template <DType GradT>
MIXPREC_HD inline float sgd_value(const OptimArrays& a, const SgdScalars& s, std::size_t i,
                                  float mult) {
  float g = grad_value<GradT>(a.grad, i, mult);
  const float p = read_param(a, i);
  // Skipped when 0, as PyTorch does: 0 * Inf would turn an Inf parameter's gradient into NaN.
  if (s.weight_decay != 0.0f) g = std::fma(s.weight_decay, p, g);
  float d = g;
  if (s.momentum != 0.0f) {
    const float buf =
        s.first_step ? g : std::fma(s.momentum, a.state0[i], s.one_minus_dampening * g);
    a.state0[i] = buf;
    d = s.nesterov ? std::fma(s.momentum, buf, g) : buf;
  }
  return std::fma(-s.lr, d, p);
}

/// Adam/AdamW for element i with gradient multiplier mult: updates exp_avg (state0[i]) and
/// exp_avg_sq (state1[i]) and returns the new parameter value (for write_param).
template <DType GradT>
MIXPREC_HD inline float adam_value(const OptimArrays& a, const AdamScalars& s, std::size_t i,
                                   float mult) {
  float g = grad_value<GradT>(a.grad, i, mult);
  const float p = read_param(a, i) * s.decay;  // decay is exactly 1 for Adam
  if (s.l2_weight_decay != 0.0f) g = std::fma(s.l2_weight_decay, p, g);
  const float m = std::fma(s.beta1, a.state0[i], s.one_minus_beta1 * g);
  const float v = std::fma(s.one_minus_beta2 * g, g, s.beta2 * a.state1[i]);
  a.state0[i] = m;
  a.state1[i] = v;
  const float denom = std::fma(std::sqrt(v), s.inv_sqrt_bias_correction2, s.eps);
  return std::fma(-s.step_size, m / denom, p);
}

}  // namespace mixprec::kernels::optim_math
