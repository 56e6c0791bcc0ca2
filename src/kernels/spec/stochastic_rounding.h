#pragma once
/// Stochastic rounding of one f32 value to bf16 or f16 with 32 caller-supplied random bits
/// (`random`), written once for every backend: the public f32_to_{bf16,f16}_bits_stochastic
/// (mixprec/core/convert.h, whose comments are the contract) forward here, and device kernels
/// (convert_stochastic, the optimizers' stochastic write) call the same functions (MIXPREC_HD),
/// so they round with the reference's bits.
#include <bit>
#include <cstdint>

#include "kernels/spec/host_device.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {

/// f32 -> bf16 bits, rounding the magnitude up with probability equal to the dropped fraction.
MIXPREC_HD constexpr std::uint16_t stochastic_bf16_bits(float value,
                                                        std::uint32_t random) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return f32_to_bf16_bits(value);  // NaN: quiet, as RNE
  // The dropped 16 bits d carry into the kept part iff (random >> 16) + d >= 2^16, which
  // has probability d / 2^16. Inf has d = 0 and stays Inf; above max the carry reaches Inf.
  return static_cast<std::uint16_t>((x + (random >> 16)) >> 16);
}

/// f32 -> f16 bits, rounding the magnitude up with probability equal to the dropped fraction of
/// one f16 spacing (2^-24 in the subnormal range).
MIXPREC_HD constexpr std::uint16_t stochastic_f16_bits(float value, std::uint32_t random) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return f32_to_f16_bits(value);                      // Inf, NaN: as RNE
  if (a >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 2^16: past Inf
  std::uint32_t kept;       // the magnitude truncated to f16, as a bit pattern
  std::uint32_t fraction;   // floor(dropped fraction of one f16 spacing * 2^32)
  if (a >= 0x38800000u) {   // >= 2^-14: normal f16, 13 dropped bits
    kept = (a - (112u << 23)) >> 13;
    fraction = (a & 0x1fffu) << 19;
  } else {
    // Subnormal f16: the value is m * 2^(e - 150) = (m >> s) units of 2^-24 with s = 126 - e
    // (an fp32 denormal has e = 0 but the scale of e = 1 and no implicit bit).
    const std::uint32_t e = a >> 23;
    const std::uint32_t m = (a & 0x7fffffu) | (e != 0 ? 0x800000u : 0u);
    const std::uint32_t s = 126u - (e != 0 ? e : 1u);  // 14 .. 125
    const std::uint64_t rest = s < 32 ? (m & ((1u << s) - 1u)) : m;
    kept = s < 32 ? m >> s : 0u;
    fraction = s <= 32 ? static_cast<std::uint32_t>(rest << (32 - s))
               : s < 64 ? static_cast<std::uint32_t>(rest >> (s - 32))
                        : 0u;
  }
  // Round up iff random + fraction carries out of 32 bits: probability fraction / 2^32.
  // A carry out of the mantissa moves to the next binade, and from 65504 to Inf (0x7c00).
  const std::uint32_t up = static_cast<std::uint32_t>(
      (static_cast<std::uint64_t>(random) + fraction) >> 32);
  return static_cast<std::uint16_t>(sign | (kept + up));
}

}  // namespace mixprec::kernels
