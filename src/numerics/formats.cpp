// The format table, the exact round-to-nearest-even quantiser and the bit-pattern codecs.
#include "mixprec/numerics/formats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "mixprec/core/error.h"
#include "numerics/quantize_detail.h"

namespace mixprec::numerics {
namespace {

// IEEE-like formats (has_inf) reserve the all-ones exponent for Inf/NaN; OCP E4M3 reserves only
// the single all-ones pattern for NaN, so its top binade holds seven finite values.
FormatInfo make_format(Format format, const char* name, int bits, int exponent_bits,
                       int mantissa_bits, bool has_inf) {
  FormatInfo f{};
  f.format = format;
  f.name = name;
  f.bits = bits;
  f.exponent_bits = exponent_bits;
  f.mantissa_bits = mantissa_bits;
  f.bias = (1 << (exponent_bits - 1)) - 1;
  f.has_inf = has_inf;
  const int all_ones = (1 << exponent_bits) - 1;
  const int emax = (has_inf ? all_ones - 1 : all_ones) - f.bias;
  const double top_mantissa =
      has_inf ? 2.0 - std::ldexp(1.0, -mantissa_bits) : 2.0 - std::ldexp(2.0, -mantissa_bits);
  f.max = std::ldexp(top_mantissa, emax);
  f.min_normal = std::ldexp(1.0, 1 - f.bias);
  f.min_subnormal = std::ldexp(1.0, 1 - f.bias - mantissa_bits);
  f.epsilon = std::ldexp(1.0, -mantissa_bits);
  f.decimal_digits = (mantissa_bits + 1) * std::log10(2.0);
  return f;
}

std::array<FormatInfo, 6> build_table() {
  return {{
      make_format(Format::fp32, "fp32", 32, 8, 23, true),
      make_format(Format::tf32, "tf32", 19, 8, 10, true),
      make_format(Format::fp16, "fp16", 16, 5, 10, true),
      make_format(Format::bf16, "bf16", 16, 8, 7, true),
      make_format(Format::fp8_e4m3, "fp8_e4m3", 8, 4, 3, false),
      make_format(Format::fp8_e5m2, "fp8_e5m2", 8, 5, 2, true),
  }};
}

double overflow_value(double x, const FormatInfo& f) {
  return f.has_inf ? std::copysign(std::numeric_limits<double>::infinity(), x)
                   : std::copysign(std::numeric_limits<double>::quiet_NaN(), x);
}

}  // namespace

namespace detail {

double quantize_with_tie(double x, const FormatInfo& f, bool* was_tie) {
  if (was_tie != nullptr) *was_tie = false;
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return f.has_inf ? x : overflow_value(x, f);
  if (x == 0) return x;
  const double a = std::fabs(x);
  int e2 = 0;
  std::frexp(a, &e2);  // a = m 2^e2 with m in [0.5, 1): floor(log2 a) = e2 - 1
  // Below the normal range the quantum stays that of the smallest binade: gradual underflow.
  const int exponent = std::max(e2 - 1, 1 - f.bias);
  const int shift = f.mantissa_bits - exponent;
  // Scaling by a power of two is exact here: the result is < 2^(mantissa_bits + 1) and,
  // scaling up, no bits are lost even from a subnormal double.
  const double scaled = std::ldexp(a, shift);
  double r = std::floor(scaled);
  const double frac = scaled - r;  // exact: scaled < 2^25
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  if (frac == 0.5 && was_tie != nullptr) *was_tie = true;
  const double q = std::ldexp(r, -shift);
  if (q > f.max) return overflow_value(x, f);
  return std::copysign(q, x);
}

double quantize_sum(double s, double p, const FormatInfo& f) {
  // s + p = t + err exactly (TwoSum). t can only round differently from s + p when t is a tie
  // of the format; then the exact sum lies on err's side of it, where no other tie is near.
  const double t = s + p;
  const double bp = t - s;
  const double err = (s - (t - bp)) + (p - bp);
  bool tie = false;
  const double q = quantize_with_tie(t, f, &tie);
  if (!tie || err == 0 || !std::isfinite(t)) return q;
  return quantize_with_tie(std::nextafter(t, err > 0 ? INFINITY : -INFINITY), f, nullptr);
}

}  // namespace detail

const std::array<FormatInfo, 6>& all_formats() {
  static const std::array<FormatInfo, 6> table = build_table();
  return table;
}

const FormatInfo& format_info(Format format) {
  return all_formats()[static_cast<std::size_t>(format)];
}

const FormatInfo& parse_format(std::string_view name) {
  for (const FormatInfo& f : all_formats()) {
    if (name == f.name) return f;
  }
  if (name == "f32" || name == "float32") return format_info(Format::fp32);
  if (name == "f16" || name == "float16" || name == "half") return format_info(Format::fp16);
  if (name == "bfloat16") return format_info(Format::bf16);
  if (name == "e4m3") return format_info(Format::fp8_e4m3);
  if (name == "e5m2") return format_info(Format::fp8_e5m2);
  MIXPREC_CHECK(false, ValueError, "parse_format",
                "unknown floating-point format '"
                    << name
                    << "'; use one of fp32, tf32, fp16, bf16, fp8_e4m3 (e4m3), fp8_e5m2 (e5m2)");
  return format_info(Format::fp32);
}

double quantize(double x, const FormatInfo& format) {
  return detail::quantize_with_tie(x, format, nullptr);
}

std::uint32_t encode_bits(double x, const FormatInfo& f) {
  const std::uint32_t sign = std::signbit(x) ? (1u << (f.bits - 1)) : 0u;
  const std::uint32_t exp_ones = (1u << f.exponent_bits) - 1u;
  const std::uint32_t mant_ones = (1u << f.mantissa_bits) - 1u;
  const double q = quantize(x, f);
  if (std::isnan(q)) {
    if (!f.has_inf) return sign | (exp_ones << f.mantissa_bits) | mant_ones;
    return sign | (exp_ones << f.mantissa_bits) | (1u << (f.mantissa_bits - 1));
  }
  if (std::isinf(q)) return sign | (exp_ones << f.mantissa_bits);
  const double a = std::fabs(q);
  if (a == 0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);
  const int exponent = e2 - 1;
  const int emin = 1 - f.bias;
  if (exponent < emin) {  // subnormal: field 0, mantissa in units of min_subnormal
    return sign | static_cast<std::uint32_t>(std::ldexp(a, f.mantissa_bits - emin));
  }
  const auto field = static_cast<std::uint32_t>(exponent + f.bias);
  const auto mant =
      static_cast<std::uint32_t>(std::ldexp(a, f.mantissa_bits - exponent)) & mant_ones;
  return sign | (field << f.mantissa_bits) | mant;
}

double decode_bits(std::uint32_t bits, const FormatInfo& f) {
  const std::uint32_t exp_ones = (1u << f.exponent_bits) - 1u;
  const std::uint32_t mant_ones = (1u << f.mantissa_bits) - 1u;
  const bool negative = ((bits >> (f.bits - 1)) & 1u) != 0;
  const std::uint32_t field = (bits >> f.mantissa_bits) & exp_ones;
  const std::uint32_t mant = bits & mant_ones;
  double v = 0;
  if (field == exp_ones && (f.has_inf || mant == mant_ones)) {
    v = (f.has_inf && mant == 0) ? std::numeric_limits<double>::infinity()
                                 : std::numeric_limits<double>::quiet_NaN();
  } else if (field == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(mant | (mant_ones + 1u)),
                   static_cast<int>(field) - f.bias - f.mantissa_bits);
  }
  return negative ? -v : v;
}

std::uint8_t encode_e4m3(double x) {
  return static_cast<std::uint8_t>(encode_bits(x, format_info(Format::fp8_e4m3)));
}
double decode_e4m3(std::uint8_t bits) { return decode_bits(bits, format_info(Format::fp8_e4m3)); }
std::uint8_t encode_e5m2(double x) {
  return static_cast<std::uint8_t>(encode_bits(x, format_info(Format::fp8_e5m2)));
}
double decode_e5m2(std::uint8_t bits) { return decode_bits(bits, format_info(Format::fp8_e5m2)); }

}  // namespace mixprec::numerics
