#pragma once
/// The per-element step of the fused unscale (unscale.h), written once: the reference loops
/// (ref/unscale_ref.cpp) and the CUDA kernel (MIXPREC_HD) call these, so the unscaled values,
/// the non-finite verdict and amax are the same bits. Kept out of unscale.h, which the Highway
/// kernels include (ODR safety).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/spec/host_device.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels::unscale_math {

/// True if x or y is Inf or NaN. Both are checked on purpose (the specification), even though
/// y is non-finite whenever x is for a finite non-zero inv; '|' keeps it branch-free.
MIXPREC_HD inline bool non_finite(float x, float y) {
  return !std::isfinite(x) | !std::isfinite(y);
}

/// amax raised by |y| when y is finite: Inf/NaN are reported by the verdict instead.
MIXPREC_HD inline float raise_amax(float amax, float y) {
  return std::isfinite(y) ? std::max(amax, std::fabs(y)) : amax;
}

/// One 16-bit element: widen x (bf16 or f16), multiply by inv in f32, round to nearest even
/// back to the dtype; y is the rounded result widened again, so a product above the dtype's max
/// counts as the overflow it becomes.
struct Unscaled16 {
  std::uint16_t bits;
  float x;
  float y;
};
MIXPREC_HD inline Unscaled16 unscale_16bit(std::uint16_t in, float inv, bool bf16) {
  const float x = bf16 ? bf16_bits_to_f32(in) : f16_bits_to_f32(in);
  const std::uint16_t bits = bf16 ? f32_to_bf16_bits(x * inv) : f32_to_f16_bits(x * inv);
  const float y = bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
  return {bits, x, y};
}

}  // namespace mixprec::kernels::unscale_math
