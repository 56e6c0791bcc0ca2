// The public bulk conversions of host arrays: argument checks, then the host kernels of the active
// backend (kernels::host_backend(): convert, convert_stochastic), whose cpu and ref implementations are bit-identical to the
// scalar functions of half.h / float8.h. Also the scalar stochastic rounding itself, the
// specification of both backends' stochastic kernels.
#include "mixprec/core/convert.h"

#include <bit>
#include <cstdint>
#include <string>

#include "kernels/convert_checks.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"

namespace mixprec {

using detail::check_convert_buffers;
using detail::check_counter_offset;

// ---- scalar stochastic rounding (the specification) ----

std::uint16_t f32_to_bf16_bits_stochastic(float value, std::uint32_t random_bits) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return f32_to_bf16_bits(value);  // NaN: quiet, as RNE
  // The dropped 16 bits d carry into the kept part iff (random_bits >> 16) + d >= 2^16, which
  // has probability d / 2^16. Inf has d = 0 and stays Inf; above max the carry reaches Inf.
  return static_cast<std::uint16_t>((x + (random_bits >> 16)) >> 16);
}

std::uint16_t f32_to_f16_bits_stochastic(float value, std::uint32_t random_bits) noexcept {
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
  // Round up iff random_bits + fraction carries out of 32 bits: probability fraction / 2^32.
  // A carry out of the mantissa moves to the next binade, and from 65504 to Inf (0x7c00).
  const std::uint32_t up = static_cast<std::uint32_t>(
      (static_cast<std::uint64_t>(random_bits) + fraction) >> 32);
  return static_cast<std::uint16_t>(sign | (kept + up));
}

// ---- bulk conversions ----

namespace {

// Host arrays run on the active backend when it computes on the host (cpu, ref: the logged
// dispatch of kernels::convert), else on the host's kernels (kernels::host_backend()).
void host_convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  if (&kernels::host_backend() == &kernels::backend()) {
    kernels::convert(src, src_dtype, dst, dst_dtype, n);
  } else {
    kernels::host_backend().convert(src, src_dtype, dst, dst_dtype, n);
  }
}
void host_convert_stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n,
                             std::uint64_t seed, std::uint64_t offset) {
  if (&kernels::host_backend() == &kernels::backend()) {
    kernels::convert_stochastic(src, dst, dst_dtype, n, seed, offset);
  } else {
    kernels::host_backend().convert_stochastic(src, dst, dst_dtype, n, seed, offset);
  }
}

}  // namespace

void convert_f32_to_bf16(const float* src, bfloat16* dst, std::size_t n) {
  check_convert_buffers("convert_f32_to_bf16", src, 4, dst, 2, n);
  host_convert(src, DType::f32, dst, DType::bf16, n);
}

void convert_bf16_to_f32(const bfloat16* src, float* dst, std::size_t n) {
  check_convert_buffers("convert_bf16_to_f32", src, 2, dst, 4, n);
  host_convert(src, DType::bf16, dst, DType::f32, n);
}

void convert_f32_to_f16(const float* src, float16* dst, std::size_t n) {
  check_convert_buffers("convert_f32_to_f16", src, 4, dst, 2, n);
  host_convert(src, DType::f32, dst, DType::f16, n);
}

void convert_f16_to_f32(const float16* src, float* dst, std::size_t n) {
  check_convert_buffers("convert_f16_to_f32", src, 2, dst, 4, n);
  host_convert(src, DType::f16, dst, DType::f32, n);
}

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  constexpr const char* op = "convert";
  const auto valid = [](DType t) { return static_cast<std::size_t>(t) < kDTypeTable.size(); };
  MIXPREC_CHECK(valid(src_dtype) && valid(dst_dtype), DTypeError, op,
                "unknown dtype code " << static_cast<int>(valid(src_dtype) ? dst_dtype : src_dtype)
                                      << "; use DType::f32, bf16, f16, f8e4m3 or f8e5m2");
  if (src_dtype == dst_dtype) {
    // Same dtype: a copy, for which overlapping ranges are fine (the backends memmove).
    MIXPREC_CHECK(n == 0 || (src != nullptr && dst != nullptr), ValueError, op,
                  "null " << (src == nullptr ? "src" : "dst") << " with n = " << n
                          << "; pass buffers of n elements");
  } else {
    check_convert_buffers(op, src, size_of(src_dtype), dst, size_of(dst_dtype), n);
  }
  host_convert(src, src_dtype, dst, dst_dtype, n);
}

void convert_f32_to_bf16_stochastic(const float* src, bfloat16* dst, std::size_t n,
                                    std::uint64_t seed, std::uint64_t offset) {
  constexpr const char* op = "convert_f32_to_bf16_stochastic";
  check_convert_buffers(op, src, 4, dst, 2, n);
  check_counter_offset(op, offset, n);
  host_convert_stochastic(src, dst, DType::bf16, n, seed, offset);
}

void convert_f32_to_f16_stochastic(const float* src, float16* dst, std::size_t n,
                                   std::uint64_t seed, std::uint64_t offset) {
  constexpr const char* op = "convert_f32_to_f16_stochastic";
  check_convert_buffers(op, src, 4, dst, 2, n);
  check_counter_offset(op, offset, n);
  host_convert_stochastic(src, dst, DType::f16, n, seed, offset);
}

}  // namespace mixprec
