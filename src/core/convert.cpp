#include "mixprec/core/convert.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "core/convert_fp8_detail.h"
#include "core/convert_isa.h"
#include "mixprec/core/cpu_features.h"
#include "core/parallel_chunks.h"
#include "mixprec/core/error.h"
#include "mixprec/core/random.h"
#include "mixprec/core/verbose.h"

namespace mixprec {
namespace {

using Bits = std::uint16_t;

using detail::for_chunks;
// 16-bit -> 16-bit conversions go through f32 in stack buffers of this many elements.
constexpr std::size_t kStackFloats = 2048;


// ---- ISA choice and verbose reasons ----

bool cpu_has(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c;
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return f.avx2 && f.fma && f.f16c;
    case Isa::avx512: return avx512;
    case Isa::avx512_bf16: return avx512 && f.avx512_bf16;
    default: return false;
  }
}

/// The fastest kernel level not above `best` (the op's fastest kernel) that may run now.
/// There are no AVX2 conversion kernels: below AVX-512 the scalar loops run.
Isa pick(Isa best) {
  if (best >= Isa::avx512_bf16 && isa_allowed(Isa::avx512_bf16)) return Isa::avx512_bf16;
  if (best >= Isa::avx512 && isa_allowed(Isa::avx512)) return Isa::avx512;
  return Isa::scalar;
}

/// "avx512_bf16: CPU lacks avx512_bf16" style list of kernels above `ran` that were skipped.
std::string skipped(Isa ran, Isa best) {
  std::string out;
  for (Isa level : {Isa::avx512_bf16, Isa::avx512}) {
    if (level > best || level <= ran) continue;
    if (!out.empty()) out += ", ";
    out += name(level);
    if (!cpu_has(level)) {
      out += level == Isa::avx512_bf16 && cpu_has(Isa::avx512) ? ": CPU lacks avx512_bf16"
                                                                 : ": CPU lacks avx512f/bw/vl/dq";
    } else {
      out += std::string(": capped at ") + name(max_isa()) + " by MIXPREC_ISA or set_max_isa()";
    }
  }
  return out;
}

void log_call(const char* op, const char* dtypes, Isa ran, Isa best) {
  if (verbose_enabled()) verbose_log(op, dtypes, name(ran), skipped(ran, best));
}

// ---- argument checks ----

void check_buffers(const char* op, const void* src, std::size_t src_size, const void* dst,
                   std::size_t dst_size, std::size_t n) {
  if (n == 0) return;
  MIXPREC_CHECK(src != nullptr && dst != nullptr, ValueError, op,
                "null " << (src == nullptr ? "src" : "dst") << " with n = " << n
                        << "; pass buffers of n elements");
  MIXPREC_CHECK(n <= std::numeric_limits<std::size_t>::max() / 4, ValueError, op,
                "n = " << n << " elements is larger than any buffer can be");
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const bool disjoint = s + n * src_size <= d || d + n * dst_size <= s;
  MIXPREC_CHECK(disjoint, ValueError, op,
                "src and dst overlap; convert into a separate buffer (in-place is not supported)");
}

void check_offset(const char* op, std::uint64_t offset, std::size_t n) {
  MIXPREC_CHECK(n <= std::numeric_limits<std::uint64_t>::max() - offset, ValueError, op,
                "offset " << offset << " + n " << n << " overflows the 64-bit element counter; "
                          << "use a new seed instead of a huge offset");
}

// ---- scalar stochastic rounding ----
// Internal (not the exported functions) so that the bulk loops inline them: calls to exported
// functions of a shared library are not inlined under -fPIC (they could be interposed).

std::uint16_t bf16_stochastic(float value, std::uint32_t random_bits) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return f32_to_bf16_bits(value);  // NaN: quiet, as RNE
  // The dropped 16 bits d carry into the kept part iff (random_bits >> 16) + d >= 2^16, which
  // has probability d / 2^16. Inf has d = 0 and stays Inf; above max the carry reaches Inf.
  return static_cast<std::uint16_t>((x + (random_bits >> 16)) >> 16);
}

std::uint16_t f16_stochastic(float value, std::uint32_t random_bits) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return f32_to_f16_bits(value);       // Inf, NaN: as RNE
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

// ---- one chunk of each conversion, on one thread, with a chosen ISA ----

void f32_to_bf16_run(const float* src, Bits* dst, std::size_t n, Isa isa) {
  if (isa == Isa::avx512_bf16) return detail::f32_to_bf16_avx512bf16(src, dst, n);
  if (isa == Isa::avx512) return detail::f32_to_bf16_avx512(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16_bits(src[i]);
}

void bf16_to_f32_run(const Bits* src, float* dst, std::size_t n, Isa isa) {
  if (isa >= Isa::avx512) return detail::bf16_to_f32_avx512(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_f32(src[i]);
}

void f32_to_f16_run(const float* src, Bits* dst, std::size_t n, Isa isa) {
  if (isa >= Isa::avx512) return detail::f32_to_f16_avx512(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = f32_to_f16_bits(src[i]);
}

void f16_to_f32_run(const Bits* src, float* dst, std::size_t n, Isa isa) {
  if (isa >= Isa::avx512) return detail::f16_to_f32_avx512(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = f16_bits_to_f32(src[i]);
}

/// Scalar stochastic rounding of src[0, n) with random_bits(seed, offset + i); each Philox
/// block is computed once for its four elements.
template <class Round>
void stochastic_scalar(const float* src, Bits* dst, std::size_t n, std::uint64_t seed,
                       std::uint64_t offset, Round round) {
  std::size_t i = 0;
  while (i < n) {
    const std::uint64_t index = offset + i;
    const Philox::Counter block = Philox::block(seed, index / 4);
    for (std::size_t word = index % 4; word < 4 && i < n; ++word, ++i) {
      dst[i] = round(src[i], block[word]);
    }
  }
}

// Lambdas rather than function pointers: their own types make the template inline the rounding.
constexpr auto round_bf16_stochastic = [](float value, std::uint32_t random) {
  return bf16_stochastic(value, random);
};
constexpr auto round_f16_stochastic = [](float value, std::uint32_t random) {
  return f16_stochastic(value, random);
};

/// Stochastic rounding of src[0, n): scalar below AVX-512, else the vector kernel, which starts
/// on a Philox block boundary (up to 3 leading elements are rounded by the scalar path).
template <class Round, class VectorKernel>
void stochastic_run(const float* src, Bits* dst, std::size_t n, std::uint64_t seed,
                    std::uint64_t offset, Isa isa, Round round, VectorKernel vector_kernel) {
  if (isa < Isa::avx512) {
    stochastic_scalar(src, dst, n, seed, offset, round);
    return;
  }
  const std::size_t head = std::min<std::size_t>(n, (4 - offset % 4) % 4);
  stochastic_scalar(src, dst, head, seed, offset, round);
  vector_kernel(src + head, dst + head, n - head, seed, offset + head);
}

void f32_to_bf16_stochastic_run(const float* src, Bits* dst, std::size_t n, std::uint64_t seed,
                                std::uint64_t offset, Isa isa) {
  stochastic_run(src, dst, n, seed, offset, isa, round_bf16_stochastic,
                 detail::f32_to_bf16_stochastic_avx512);
}

void f32_to_f16_stochastic_run(const float* src, Bits* dst, std::size_t n, std::uint64_t seed,
                               std::uint64_t offset, Isa isa) {
  stochastic_run(src, dst, n, seed, offset, isa, round_f16_stochastic,
                 detail::f32_to_f16_stochastic_avx512);
}

// ---- whole arrays ----

using Widen = void (*)(const Bits*, float*, std::size_t, Isa);
using Narrow = void (*)(const float*, Bits*, std::size_t, Isa);

/// 16-bit -> 16-bit through f32, kStackFloats at a time: no heap allocation.
void via_f32(const Bits* src, Bits* dst, std::size_t n, Widen widen, Isa widen_isa, Narrow narrow,
             Isa narrow_isa) {
  for_chunks(n, [&](std::size_t begin, std::size_t end) {
    float buffer[kStackFloats];
    for (std::size_t i = begin; i < end; i += kStackFloats) {
      const std::size_t count = std::min(kStackFloats, end - i);
      widen(src + i, buffer, count, widen_isa);
      narrow(buffer, dst + i, count, narrow_isa);
    }
  });
}

template <class Src, class Dst>
void run_bulk(const Src* src, Dst* dst, std::size_t n, Isa isa,
              void (*run)(const Src*, Dst*, std::size_t, Isa)) {
  for_chunks(n, [&](std::size_t begin, std::size_t end) {
    run(src + begin, dst + begin, end - begin, isa);
  });
}

Bits* bits(bfloat16* p) { return reinterpret_cast<Bits*>(p); }
Bits* bits(float16* p) { return reinterpret_cast<Bits*>(p); }
const Bits* bits(const bfloat16* p) { return reinterpret_cast<const Bits*>(p); }
const Bits* bits(const float16* p) { return reinterpret_cast<const Bits*>(p); }

}  // namespace

std::uint16_t f32_to_bf16_bits_stochastic(float value, std::uint32_t random_bits) noexcept {
  return bf16_stochastic(value, random_bits);
}

std::uint16_t f32_to_f16_bits_stochastic(float value, std::uint32_t random_bits) noexcept {
  return f16_stochastic(value, random_bits);
}

// ---- bulk conversions ----

void convert_f32_to_bf16(const float* src, bfloat16* dst, std::size_t n) {
  check_buffers("convert_f32_to_bf16", src, 4, dst, 2, n);
  const Isa isa = pick(Isa::avx512_bf16);
  log_call("convert_f32_to_bf16", "f32->bf16", isa, Isa::avx512_bf16);
  run_bulk(src, bits(dst), n, isa, f32_to_bf16_run);
}

void convert_bf16_to_f32(const bfloat16* src, float* dst, std::size_t n) {
  check_buffers("convert_bf16_to_f32", src, 2, dst, 4, n);
  const Isa isa = pick(Isa::avx512);
  log_call("convert_bf16_to_f32", "bf16->f32", isa, Isa::avx512);
  run_bulk(bits(src), dst, n, isa, bf16_to_f32_run);
}

void convert_f32_to_f16(const float* src, float16* dst, std::size_t n) {
  check_buffers("convert_f32_to_f16", src, 4, dst, 2, n);
  const Isa isa = pick(Isa::avx512);
  log_call("convert_f32_to_f16", "f32->f16", isa, Isa::avx512);
  run_bulk(src, bits(dst), n, isa, f32_to_f16_run);
}

void convert_f16_to_f32(const float16* src, float* dst, std::size_t n) {
  check_buffers("convert_f16_to_f32", src, 2, dst, 4, n);
  const Isa isa = pick(Isa::avx512);
  log_call("convert_f16_to_f32", "f16->f32", isa, Isa::avx512);
  run_bulk(bits(src), dst, n, isa, f16_to_f32_run);
}

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  constexpr const char* op = "convert";
  const auto valid = [](DType t) { return static_cast<std::size_t>(t) < kDTypeTable.size(); };
  MIXPREC_CHECK(valid(src_dtype) && valid(dst_dtype), DTypeError, op,
                "unknown dtype code " << static_cast<int>(valid(src_dtype) ? dst_dtype : src_dtype)
                                      << "; use DType::f32, bf16, f16, f8e4m3 or f8e5m2");
  const std::string dtypes = std::string(name(src_dtype)) + "->" + name(dst_dtype);
  if (src_dtype == dst_dtype) {
    // Same dtype: a copy; overlapping ranges are fine (memmove).
    MIXPREC_CHECK(n == 0 || (src != nullptr && dst != nullptr), ValueError, op,
                  "null " << (src == nullptr ? "src" : "dst") << " with n = " << n
                          << "; pass buffers of n elements");
    if (verbose_enabled()) verbose_log(op, dtypes, "memmove");
    if (n > 0 && src != dst) std::memmove(dst, src, n * size_of(src_dtype));
    return;
  }
  check_buffers(op, src, size_of(src_dtype), dst, size_of(dst_dtype), n);
  if (is_storage_only(src_dtype) || is_storage_only(dst_dtype)) {
    return detail::convert_fp8_pair(src, src_dtype, dst, dst_dtype, n);
  }
  const auto* f_src = static_cast<const float*>(src);
  const auto* h_src = static_cast<const Bits*>(src);
  auto* f_dst = static_cast<float*>(dst);
  auto* h_dst = static_cast<Bits*>(dst);
  const Isa narrow_bf16 = pick(Isa::avx512_bf16);
  const Isa other = pick(Isa::avx512);
  const auto log = [&](Isa ran, Isa best) {
    if (verbose_enabled()) verbose_log(op, dtypes, name(ran), skipped(ran, best));
  };
  if (src_dtype == DType::f32 && dst_dtype == DType::bf16) {
    log(narrow_bf16, Isa::avx512_bf16);
    run_bulk(f_src, h_dst, n, narrow_bf16, f32_to_bf16_run);
  } else if (src_dtype == DType::f32 && dst_dtype == DType::f16) {
    log(other, Isa::avx512);
    run_bulk(f_src, h_dst, n, other, f32_to_f16_run);
  } else if (src_dtype == DType::bf16 && dst_dtype == DType::f32) {
    log(other, Isa::avx512);
    run_bulk(h_src, f_dst, n, other, bf16_to_f32_run);
  } else if (src_dtype == DType::f16 && dst_dtype == DType::f32) {
    log(other, Isa::avx512);
    run_bulk(h_src, f_dst, n, other, f16_to_f32_run);
  } else if (src_dtype == DType::bf16) {  // bf16 -> f16
    log(other, Isa::avx512);
    via_f32(h_src, h_dst, n, bf16_to_f32_run, other, f32_to_f16_run, other);
  } else {  // f16 -> bf16: the narrowing may use AVX512-BF16
    log(narrow_bf16, Isa::avx512_bf16);
    via_f32(h_src, h_dst, n, f16_to_f32_run, other, f32_to_bf16_run, narrow_bf16);
  }
}

void convert_f32_to_bf16_stochastic(const float* src, bfloat16* dst, std::size_t n,
                                    std::uint64_t seed, std::uint64_t offset) {
  constexpr const char* op = "convert_f32_to_bf16_stochastic";
  check_buffers(op, src, 4, dst, 2, n);
  check_offset(op, offset, n);
  const Isa isa = pick(Isa::avx512);
  log_call(op, "f32->bf16", isa, Isa::avx512);
  Bits* out = bits(dst);
  for_chunks(n, [&](std::size_t begin, std::size_t end) {
    f32_to_bf16_stochastic_run(src + begin, out + begin, end - begin, seed, offset + begin, isa);
  });
}

void convert_f32_to_f16_stochastic(const float* src, float16* dst, std::size_t n,
                                   std::uint64_t seed, std::uint64_t offset) {
  constexpr const char* op = "convert_f32_to_f16_stochastic";
  check_buffers(op, src, 4, dst, 2, n);
  check_offset(op, offset, n);
  const Isa isa = pick(Isa::avx512);
  log_call(op, "f32->f16", isa, Isa::avx512);
  Bits* out = bits(dst);
  for_chunks(n, [&](std::size_t begin, std::size_t end) {
    f32_to_f16_stochastic_run(src + begin, out + begin, end - begin, seed, offset + begin, isa);
  });
}

}  // namespace mixprec
