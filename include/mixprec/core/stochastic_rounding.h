#pragma once
/// Scalar stochastic rounding of one f32 value to bf16 or f16 with 32 caller-supplied random
/// bits: the specification every backend's stochastic conversion computes bit for bit (the
/// bulk conversions of mixprec/kernels/convert_arrays.h, the optimizers' stochastic weight
/// writes). constexpr, so the CUDA kernels compile the same functions (as they do half.h's).
#include <bit>
#include <cstdint>

#include "mixprec/core/half.h"

namespace mixprec {

/// With f the fraction of the bf16 spacing dropped by truncation toward zero, the magnitude
/// rounds up iff random_bits >= 2^32 - f * 2^32, so P(up) = f exactly (f has 16 bits): the result
/// is the f32 pattern plus random_bits >> 16, truncated. NaN -> quiet NaN as in RNE; Inf stays
/// Inf; a finite value above bf16 max rounds up to Inf with probability
/// (|x| - max) / (2^128 - max), i.e. Inf counts as the next value 2^128.
constexpr std::uint16_t f32_to_bf16_bits_stochastic(float value,
                                                    std::uint32_t random_bits) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return f32_to_bf16_bits(value);  // NaN: quiet, as RNE
  return static_cast<std::uint16_t>((x + (random_bits >> 16)) >> 16);
}

/// The same rule relative to the f16 spacing (2^-24 in the subnormal range): rounds up iff
/// random_bits >= 2^32 - floor(f * 2^32), so P(up) = f exactly whenever f fits in 32 bits, which
/// holds for all |x| >= 2^-33 (below it f < 2^-9 is truncated to a multiple of 2^-32).
/// |x| in (65504, 65536) goes to Inf with probability (|x| - 65504) / 32 (Inf counts as 65536),
/// |x| >= 65536 always; NaN -> quiet NaN as in RNE; Inf stays Inf.
constexpr std::uint16_t f32_to_f16_bits_stochastic(float value,
                                                   std::uint32_t random_bits) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return f32_to_f16_bits(value);                      // Inf, NaN: as RNE
  if (a >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 2^16: past Inf
  std::uint32_t kept;      // the magnitude truncated to f16, as a bit pattern
  std::uint32_t fraction;  // floor(dropped fraction of one f16 spacing * 2^32)
  if (a >= 0x38800000u) {  // >= 2^-14: normal f16, 13 dropped bits
    kept = (a - (112u << 23)) >> 13;
    fraction = (a & 0x1fffu) << 19;
  } else {
    const std::uint32_t e = a >> 23;
    const std::uint32_t m = (a & 0x7fffffu) | (e != 0 ? 0x800000u : 0u);
    const std::uint32_t s = 126u - (e != 0 ? e : 1u);  // 14 .. 125
    const std::uint64_t rest = s < 32 ? (m & ((1u << s) - 1u)) : m;
    kept = s < 32 ? m >> s : 0u;
    fraction = s <= 32 ? static_cast<std::uint32_t>(rest << (32 - s))
               : s < 64 ? static_cast<std::uint32_t>(rest >> (s - 32))
                        : 0u;
  }
  const std::uint32_t up = static_cast<std::uint32_t>(
      (static_cast<std::uint64_t>(random_bits) + fraction) >> 32);
  return static_cast<std::uint16_t>(sign | (kept + up));
}

}  // namespace mixprec
