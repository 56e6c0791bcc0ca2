#pragma once
/// The 8-bit floating-point storage types float8_e4m3 and float8_e5m2 (OCP OFP8) and their scalar
/// conversions to and from float. These scalar conversions are the reference every bulk fp8
/// conversion (convert_fp8.h) matches bit for bit; tests check them against the independent
/// double-precision quantiser of numerics/formats.h.
///
/// Overflow follows OCP's non-saturating mode, which is what PyTorch's float8_e4m3fn /
/// float8_e5m2 casts did on CPU when this was written (c10's fp8e4m3fn_from_fp32_value, now
/// torch/headeronly/util/Float8_e4m3fn.h: every |x| >= 480 and +-Inf become 0x7F/0xFF; pytorch/ao
/// issue 1912: "the cast to torch.float8_e4m3fn is unsaturated in PyTorch eager mode"; pytorch
/// issue 150756: values between 448 and 464 round to 448, as expected). The value is rounded
/// first (to nearest, ties to even) and only a result beyond the largest finite value
/// overflows: E4M3 to NaN (it has no Inf), E5M2 to Inf. So 464 (a tie) still gives 448 in E4M3,
/// and 61440 (a tie) gives Inf in E5M2. Note that PyTorch pull request 178817 (April 2026) makes
/// CPU casts saturate finite E4M3 overflow to 448; mixprec keeps the OCP non-saturating rule,
/// so an out-of-range value is visible as NaN instead of silently clipped.
#include <bit>
#include <cstdint>

#include "mixprec/core/half.h"

namespace mixprec {
namespace detail {

/// Rounds an fp32 value to the nearest 8-bit pattern of a format with kMant stored mantissa bits,
/// exponent bias kBias and (kHasInf) an IEEE-like all-ones exponent, ties to even. NaN becomes
/// the canonical NaN with the input's sign (E4M3 S.1111.111, E5M2 S.11111.10), a result beyond
/// max becomes Inf (kHasInf) or NaN, and subnormals are kept (gradual underflow).
template <int kMant, int kBias, bool kHasInf>
constexpr std::uint8_t f32_to_fp8_bits(float value) noexcept {
  constexpr std::uint32_t kExpOnes = (1u << (7 - kMant)) - 1u;
  constexpr std::uint32_t kInf = kExpOnes << kMant;
  constexpr std::uint32_t kNaN = kHasInf ? (kInf | (1u << (kMant - 1))) : 0x7fu;
  constexpr std::uint32_t kMaxFinite = kHasInf ? kInf - 1u : 0x7eu;
  constexpr std::uint32_t kOverflow = kHasInf ? kInf : kNaN;
  constexpr int kDrop = 23 - kMant;  // fp32 mantissa bits that do not fit
  // fp32 bit patterns of the smallest normal 2^(1 - bias) and of half the smallest subnormal.
  constexpr std::uint32_t kMinNormal = static_cast<std::uint32_t>(128 - kBias) << 23;
  constexpr std::uint32_t kHalfMinSub = static_cast<std::uint32_t>(127 - kBias - kMant) << 23;

  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint8_t>(sign | kNaN);
  if (a >= kMinNormal) {
    // Round half to even on the dropped bits, then rebias the exponent. Inf and huge values
    // land above the largest finite pattern and overflow.
    const std::uint32_t rounded = (a + ((1u << (kDrop - 1)) - 1u) + ((a >> kDrop) & 1u)) >> kDrop;
    const std::uint32_t r = rounded - (static_cast<std::uint32_t>(127 - kBias) << kMant);
    return static_cast<std::uint8_t>(sign | (r > kMaxFinite ? kOverflow : r));
  }
  if (a <= kHalfMinSub) return sign;  // at most half the smallest subnormal: ties to even give 0
  // Subnormal result: the value is m * 2^(e - 150); in units of the smallest subnormal
  // 2^(1 - bias - mant) that is m >> s with s = 151 - bias - mant - e (between 21 and 24 here).
  const std::uint32_t e = a >> 23;
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t s = static_cast<std::uint32_t>(151 - kBias - kMant) - e;
  std::uint32_t h = m >> s;
  const std::uint32_t rem = m & ((1u << s) - 1u);
  const std::uint32_t half = 1u << (s - 1u);
  if (rem > half || (rem == half && (h & 1u) != 0)) ++h;  // may carry into the smallest normal
  return static_cast<std::uint8_t>(sign | h);
}

}  // namespace detail

/// Rounds an fp32 value to the nearest FP8 E4M3 pattern (OCP "fn": bias 7, no Inf, max 448),
/// ties to even. NaN, +-Inf and every value that rounds beyond 448 (|x| > 464) become NaN
/// (S.1111.111) with the input's sign; below 2^-6 the result is subnormal (step 2^-9).
constexpr std::uint8_t f32_to_e4m3_bits(float value) noexcept {
  return detail::f32_to_fp8_bits<3, 7, false>(value);
}

/// Rounds an fp32 value to the nearest FP8 E5M2 pattern (IEEE-like: bias 15, Inf, max 57344),
/// ties to even. NaN becomes S.11111.10; |x| >= 61440 and +-Inf become +-Inf.
constexpr std::uint8_t f32_to_e5m2_bits(float value) noexcept {
  return detail::f32_to_fp8_bits<2, 15, true>(value);
}

/// Widens an FP8 E4M3 pattern to fp32 exactly; S.1111.111 becomes a quiet NaN with that sign.
constexpr float e4m3_bits_to_f32(std::uint8_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x80u) << 24;
  const std::uint32_t mag = bits & 0x7fu;
  if (mag == 0x7fu) return std::bit_cast<float>(sign | 0x7fc00000u);
  const std::uint32_t exp = mag >> 3;
  std::uint32_t mant = mag & 0x7u;
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 120u) << 23) | (mant << 20));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal mant * 2^-9: shift the leading one into the implicit position.
  std::uint32_t e = 121u;  // fp32 exponent field of 2^-6, the smallest E4M3 normal
  while ((mant & 0x8u) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mant & 0x7u) << 20));
}

/// Widens an FP8 E5M2 pattern to fp32 exactly. E5M2 is binary16 with the low 8 mantissa bits
/// dropped, so this is the f16 widening of bits << 8 (a NaN keeps its payload and comes out quiet).
constexpr float e5m2_bits_to_f32(std::uint8_t bits) noexcept {
  return f16_bits_to_f32(static_cast<std::uint16_t>(bits << 8));
}

/// FP8 E4M3 storage type (OCP OFP8 E4M3, PyTorch's float8_e4m3fn). There is no arithmetic on it:
/// widen to float, compute, round back.
struct float8_e4m3 {
  std::uint8_t bits = 0;
  constexpr float8_e4m3() noexcept = default;
  /// Rounds to nearest even; NaN, Inf and |x| > 464 become NaN.
  constexpr explicit float8_e4m3(float value) noexcept : bits(f32_to_e4m3_bits(value)) {}
  static constexpr float8_e4m3 from_bits(std::uint8_t b) noexcept {
    float8_e4m3 r;
    r.bits = b;
    return r;
  }
  constexpr explicit operator float() const noexcept { return e4m3_bits_to_f32(bits); }
};

/// FP8 E5M2 storage type (OCP OFP8 E5M2, PyTorch's float8_e5m2). There is no arithmetic on it.
struct float8_e5m2 {
  std::uint8_t bits = 0;
  constexpr float8_e5m2() noexcept = default;
  /// Rounds to nearest even; NaN stays NaN, |x| >= 61440 becomes Inf.
  constexpr explicit float8_e5m2(float value) noexcept : bits(f32_to_e5m2_bits(value)) {}
  static constexpr float8_e5m2 from_bits(std::uint8_t b) noexcept {
    float8_e5m2 r;
    r.bits = b;
    return r;
  }
  constexpr explicit operator float() const noexcept { return e5m2_bits_to_f32(bits); }
};

static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1);

}  // namespace mixprec
