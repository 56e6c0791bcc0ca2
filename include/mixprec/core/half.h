#pragma once
/// The 16-bit scalar types bfloat16 and float16, and their scalar conversions to and from float.
/// These scalar conversions are the reference that every vectorised conversion must match bit for bit.
#include <bit>
#include <cstdint>

namespace mixprec {

/// Rounds an fp32 value to the nearest bf16 bit pattern, ties to even; NaN stays NaN (quiet),
/// overflow becomes Inf, subnormals round like any other value (bf16 shares fp32's exponent range).
constexpr std::uint16_t f32_to_bf16_bits(float value) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // set the quiet bit, keep sign
  }
  x += 0x7fffu + ((x >> 16) & 1u);  // round half to even on the 16 dropped bits
  return static_cast<std::uint16_t>(x >> 16);
}

/// Widens a bf16 bit pattern to fp32 exactly: a pure 16-bit shift, so even a signalling NaN
/// passes unchanged (no x86 or GPU bf16 widening quiets it either).
constexpr float bf16_bits_to_f32(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// Rounds an fp32 value to the nearest IEEE binary16 bit pattern, ties to even; NaN stays NaN
/// (quiet), magnitudes >= 65520 become Inf, values below 2^-14 become subnormals or signed zero.
constexpr std::uint16_t f32_to_f16_bits(float value) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) {
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  }
  if (x >= 0x38800000u) {  // at least 2^-14: a normal binary16 (or overflow)
    x += 0x0fffu + ((x >> 13) & 1u);
    x -= 112u << 23;  // rebias the exponent from 127 to 15
    std::uint32_t h = x >> 13;
    if (h >= 0x7c00u) h = 0x7c00u;
    return static_cast<std::uint16_t>(sign | h);
  }
  if (x <= 0x33000000u) {  // at most 2^-25, half the smallest subnormal: ties to even give zero
    return static_cast<std::uint16_t>(sign);
  }
  // Subnormal result: the value is m * 2^(e-150); in units of 2^-24 that is m >> (126 - e).
  const std::uint32_t e = x >> 23;
  const std::uint32_t m = (x & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;
  std::uint32_t h = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

/// Widens an IEEE binary16 bit pattern to fp32 exactly (subnormals become normal fp32 values);
/// a NaN keeps its sign and payload and comes out quiet, as IEEE 754 and F16C vcvtph2ps do.
constexpr float f16_bits_to_f32(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1fu) {
    // Inf, or NaN: a signalling NaN gets the fp32 quiet bit (matches vcvtph2ps bit for bit).
    const std::uint32_t quiet = mant != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mant << 13));
  }
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Normalise a subnormal: shift the leading one into the implicit position.
  std::uint32_t e = 113u;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

/// Brain floating point: 1 sign, 8 exponent, 7 mantissa bits. Arithmetic happens in float.
struct bfloat16 {
  std::uint16_t bits = 0;
  constexpr bfloat16() noexcept = default;
  /// Rounds to nearest even; NaN stays NaN, overflow becomes Inf.
  constexpr explicit bfloat16(float value) noexcept : bits(f32_to_bf16_bits(value)) {}
  static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 r;
    r.bits = b;
    return r;
  }
  constexpr operator float() const noexcept { return bf16_bits_to_f32(bits); }
};

/// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits. Arithmetic happens in float.
struct float16 {
  std::uint16_t bits = 0;
  constexpr float16() noexcept = default;
  /// Rounds to nearest even; NaN stays NaN, |x| >= 65520 becomes Inf.
  constexpr explicit float16(float value) noexcept : bits(f32_to_f16_bits(value)) {}
  static constexpr float16 from_bits(std::uint16_t b) noexcept {
    float16 r;
    r.bits = b;
    return r;
  }
  constexpr operator float() const noexcept { return f16_bits_to_f32(bits); }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2);

}  // namespace mixprec
