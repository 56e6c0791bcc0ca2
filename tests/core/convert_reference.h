#pragma once
/// Reference fp32 -> bf16/f16 rounding for the conversion tests, written independently of the
/// bit tricks in half.h, and the sample of fp32 patterns used where a full sweep is too slow.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace mixprec::test {

// Independent references (not the bit tricks of half.h): the sweep uses an integer one that
// decodes the fp32 significand and rounds it half to even explicitly; a second one in double
// arithmetic with frexp/ldexp checks it on millions of patterns.

struct Format {
  int mant_bits;  // stored mantissa bits
  int emin;       // exponent of the smallest normal
  int emax;       // exponent of the largest finite binade (= bias)
};
constexpr Format kBf16{7, -126, 127};
constexpr Format kF16{10, -14, 15};

inline std::uint16_t all_ones_exponent(const Format& f) {
  return static_cast<std::uint16_t>(((1u << (15 - f.mant_bits)) - 1u) << f.mant_bits);
}

/// A quiet NaN keeping the leading payload bits (what x86, ARM and GPUs do; IEEE allows it).
inline std::uint16_t reference_nan(std::uint32_t bits, const Format& f) {
  const std::uint32_t sign = (bits >> 31) << 15;
  const std::uint32_t payload = (bits & 0x7fffffu) >> (23 - f.mant_bits);
  const std::uint32_t quiet = 1u << (f.mant_bits - 1);
  return static_cast<std::uint16_t>(sign | all_ones_exponent(f) | quiet | payload);
}

/// Encodes sign * n * 2^spacing, n an integer below 2^(mant_bits + 2), from its exponent and
/// significand (Inf when the exponent passes emax).
inline std::uint16_t encode(std::uint16_t sign, std::int64_t n, int spacing, const Format& f) {
  const std::int64_t implicit = std::int64_t{1} << f.mant_bits;
  if (n < implicit) return static_cast<std::uint16_t>(sign | n);  // subnormal (or zero)
  int exponent = spacing + f.mant_bits;                            // of the leading bit of n
  if (n == 2 * implicit) {                                         // rounded up to a power of 2
    n = implicit;
    ++exponent;
  }
  if (exponent > f.emax) return sign | all_ones_exponent(f);
  const auto field = static_cast<std::uint32_t>(exponent + f.emax);
  return static_cast<std::uint16_t>(sign | (field << f.mant_bits) |
                                    static_cast<std::uint32_t>(n - implicit));
}

/// For each fp32 exponent field: the exponent of the format's spacing (ulp) in that binade,
/// from frexp. fp32 denormals all lie below the format's normals, so they share one spacing.
struct Spacings {
  std::array<int, 256> exponent{};
  explicit Spacings(const Format& f) {
    for (int field = 0; field < 255; ++field) {
      int e = 0;
      std::frexp(std::ldexp(1.0, std::max(field, 1) - 127), &e);  // binade [2^(e-1), 2^e)
      exponent[static_cast<std::size_t>(field)] = std::max(e - 1, f.emin) - f.mant_bits;
    }
  }
};
inline const Spacings kBf16Spacings(kBf16);
inline const Spacings kF16Spacings(kF16);

/// Integer reference: |x| = significand * 2^exponent exactly; drop the significand bits below
/// the format's spacing, round half to even on them, encode. Fast enough for 2^33 calls.
inline std::uint16_t reference_round(std::uint32_t bits, const Format& f) {
  const std::uint16_t sign = (bits >> 31) != 0 ? 0x8000 : 0;
  const std::uint32_t field = (bits >> 23) & 0xffu;
  const std::uint32_t fraction = bits & 0x7fffffu;
  if (field == 0xffu) return fraction != 0 ? reference_nan(bits, f) : sign | all_ones_exponent(f);
  const std::uint64_t significand = field != 0 ? fraction | 0x800000u : fraction;
  const int exponent = static_cast<int>(field != 0 ? field : 1) - 150;
  const int spacing = (f.mant_bits == kBf16.mant_bits ? kBf16Spacings : kF16Spacings)
                          .exponent[field];
  const int drop = spacing - exponent;  // >= 13 for both formats
  if (drop > 25) return sign;           // significand < 2^24 <= half a spacing: rounds to 0
  auto n = static_cast<std::int64_t>(significand >> drop);
  const std::uint64_t rest = significand & ((std::uint64_t{1} << drop) - 1);
  const std::uint64_t half = std::uint64_t{1} << (drop - 1);
  if (rest > half || (rest == half && n % 2 == 1)) ++n;
  return encode(sign, n, spacing, f);
}

/// Double reference: scale |x| by a power of two (ldexp) so one spacing is 1, round half to
/// even with floor/fmod, encode. Slower; it vouches for reference_round.
inline std::uint16_t reference_round_double(std::uint32_t bits, const Format& f) {
  const float x = std::bit_cast<float>(bits);
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return reference_nan(bits, f);
  if (std::isinf(x)) return sign | all_ones_exponent(f);
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int spacing = std::max(e - 1, f.emin) - f.mant_bits;
  const double scaled = std::ldexp(a, -spacing);  // exact
  double n = std::floor(scaled);
  const double rest = scaled - n;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) == 1.0)) n += 1.0;
  return encode(sign, static_cast<std::int64_t>(n), spacing, f);
}

/// The value of a 16-bit pattern, from the IEEE formula (NaN for NaN patterns).
inline double reference_decode(std::uint16_t h, const Format& f) {
  const int exp_bits = 15 - f.mant_bits;
  const int e = (h >> f.mant_bits) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << f.mant_bits) - 1);
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m != 0 ? std::nan("") : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, f.emin - f.mant_bits);
  return s * std::ldexp(m + (1 << f.mant_bits), e - f.emax - f.mant_bits);
}

inline bool is_nan16(std::uint16_t h, const Format& f) {
  const std::uint16_t inf = all_ones_exponent(f);
  return (h & inf) == inf && (h & ((1u << f.mant_bits) - 1u)) != 0;
}

inline std::uint32_t f32_bits(float v) { return std::bit_cast<std::uint32_t>(v); }
inline float f32_from(std::uint32_t b) { return std::bit_cast<float>(b); }

inline std::string hex(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

/// Every 4099th pattern, the specials, and each finite 16-bit value of both formats and the
/// tie above it, each with its fp32 neighbours, in both signs: this covers the boundaries
/// around max (the tie above max is the overflow threshold), min normal and min subnormal.
inline std::vector<std::uint32_t> sample_patterns() {
  std::vector<std::uint32_t> p;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 4099) {
    p.push_back(static_cast<std::uint32_t>(b));
  }
  for (std::uint32_t s : {0x0u, 0x1u, 0x7fffffu, 0x800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
                          0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0x00008000u, 0x00018000u}) {
    p.push_back(s);
    p.push_back(s | 0x80000000u);
  }
  for (const Format* f : {&kBf16, &kF16}) {
    for (std::uint32_t h = 0; h < 0x8000; ++h) {
      const double v = reference_decode(static_cast<std::uint16_t>(h), *f);
      if (std::isnan(v) || std::isinf(v)) continue;
      double next = reference_decode(static_cast<std::uint16_t>(h + 1), *f);
      if (std::isinf(next)) next = 2 * v - reference_decode(static_cast<std::uint16_t>(h - 1), *f);
      const std::uint32_t value_bits = f32_bits(static_cast<float>(v));
      const std::uint32_t tie_bits = f32_bits(static_cast<float>((v + next) / 2));  // exact
      for (std::uint32_t b : {value_bits, tie_bits}) {
        for (std::uint32_t d : {b - 1, b, b + 1}) {
          p.push_back(d & 0x7fffffffu);
          p.push_back(d | 0x80000000u);
        }
      }
    }
  }
  return p;
}

}  // namespace mixprec::test
