// Scalar reference of the fused unscale + non-finite check: the specification the AVX-512 kernel
// must match bit for bit.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/unscale_kernels.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {

bool unscale_f32_ref(const float* in, float* out, std::size_t n, float inv) noexcept {
  bool found = false;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float y = x * inv;
    // Non-short-circuit '|' keeps the loop branch-free; both sides are checked on purpose (the
    // specification), even though y is non-finite whenever x is for a finite non-zero inv.
    found |= !std::isfinite(x) | !std::isfinite(y);
    out[i] = y;
  }
  return found;
}

bool unscale_16bit_ref(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv,
                       int dtype) noexcept {
  const bool bf16 = dtype == kUnscaleBF16;
  bool found = false;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = bf16 ? bf16_bits_to_f32(in[i]) : f16_bits_to_f32(in[i]);
    const std::uint16_t bits = bf16 ? f32_to_bf16_bits(x * inv) : f32_to_f16_bits(x * inv);
    // Check the rounded result: a product that overflows the 16-bit range becomes Inf there.
    const float y = bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
    found |= !std::isfinite(x) | !std::isfinite(y);
    out[i] = bits;
  }
  return found;
}

}  // namespace mixprec::kernels
