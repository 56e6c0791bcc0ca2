// Bulk fp8 conversions: a 256-entry decode table and the scalar rounding of float8.h.
#include "mixprec/core/convert_fp8.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/convert_fp8_detail.h"
#include "core/parallel_chunks.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"
#include "mixprec/core/verbose.h"

namespace mixprec {
namespace {

using Byte = std::uint8_t;
using Bits16 = std::uint16_t;

using detail::for_chunks;


template <float (*Decode)(Byte)>
constexpr std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[static_cast<std::size_t>(i)] = Decode(static_cast<Byte>(i));
  return t;
}

constexpr float decode_e4m3(Byte b) { return e4m3_bits_to_f32(b); }
constexpr float decode_e5m2(Byte b) { return e5m2_bits_to_f32(b); }

constexpr std::array<float, 256> kE4M3Table = make_table<decode_e4m3>();
constexpr std::array<float, 256> kE5M2Table = make_table<decode_e5m2>();

// Spot checks at compile time: the largest finite values and the smallest subnormals.
static_assert(kE4M3Table[0x7e] == 448.0f && kE4M3Table[0x01] == 0.001953125f);
static_assert(kE5M2Table[0x7b] == 57344.0f && kE5M2Table[0x01] == 1.52587890625e-05f);

bool is_fp8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }

void require_fp8(const char* op, DType format) {
  MIXPREC_CHECK(static_cast<std::size_t>(format) < kDTypeTable.size() && is_fp8(format),
                DTypeError, op,
                "format must be f8e4m3 or f8e5m2, got "
                    << (static_cast<std::size_t>(format) < kDTypeTable.size()
                            ? std::string(name(format))
                            : "dtype code " + std::to_string(static_cast<int>(format))));
}

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
  MIXPREC_CHECK(s + n * src_size <= d || d + n * dst_size <= s, ValueError, op,
                "src and dst overlap; convert into a separate buffer (in-place is not supported)");
}

/// Element i of a non-fp8 buffer of dtype t, widened exactly to f32.
float widen(const void* p, DType t, std::size_t i) {
  if (t == DType::f32) return static_cast<const float*>(p)[i];
  const Bits16 b = static_cast<const Bits16*>(p)[i];
  return t == DType::bf16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
}

/// Rounds v to the non-fp8 dtype t and stores it as element i.
void narrow(void* p, DType t, std::size_t i, float v) {
  if (t == DType::f32) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  static_cast<Bits16*>(p)[i] = t == DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
}

Byte encode(float v, DType format) {
  return format == DType::f8e4m3 ? f32_to_e4m3_bits(v) : f32_to_e5m2_bits(v);
}

void log_call(DType from, DType to) {
  if (verbose_enabled()) {
    verbose_log("convert", std::string(name(from)) + "->" + name(to), "scalar",
                "vectorised fp8 conversion: none (scalar table decode and rounding)");
  }
}

}  // namespace

const std::array<float, 256>& fp8_decode_table(DType format) {
  require_fp8("fp8_decode_table", format);
  return format == DType::f8e4m3 ? kE4M3Table : kE5M2Table;
}

void convert_fp8_to_f32(const Byte* src, DType format, float* dst, std::size_t n) {
  constexpr const char* op = "convert_fp8_to_f32";
  require_fp8(op, format);
  check_buffers(op, src, 1, dst, 4, n);
  log_call(format, DType::f32);
  const float* table = fp8_decode_table(format).data();
  for_chunks(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) dst[i] = table[src[i]];
  });
}

void convert_f32_to_fp8(const float* src, Byte* dst, DType format, std::size_t n) {
  constexpr const char* op = "convert_f32_to_fp8";
  require_fp8(op, format);
  check_buffers(op, src, 4, dst, 1, n);
  log_call(DType::f32, format);
  for_chunks(n, [&](std::size_t begin, std::size_t end) {
    if (format == DType::f8e4m3) {
      for (std::size_t i = begin; i < end; ++i) dst[i] = f32_to_e4m3_bits(src[i]);
    } else {
      for (std::size_t i = begin; i < end; ++i) dst[i] = f32_to_e5m2_bits(src[i]);
    }
  });
}

namespace detail {

void convert_fp8_pair(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                      std::size_t n) {
  MIXPREC_ASSERT(src_dtype != dst_dtype && (is_fp8(src_dtype) || is_fp8(dst_dtype)));
  log_call(src_dtype, dst_dtype);
  const auto* in = static_cast<const Byte*>(src);
  auto* out = static_cast<Byte*>(dst);
  if (is_fp8(src_dtype)) {
    // Decoding is exact, and every fp8 value is representable in f32, bf16, f16 and, when it
    // is in range, in the other fp8 format; so the only rounding is the final one.
    const float* table = fp8_decode_table(src_dtype).data();
    for_chunks(n, [&](std::size_t begin, std::size_t end) {
      if (is_fp8(dst_dtype)) {
        for (std::size_t i = begin; i < end; ++i) out[i] = encode(table[in[i]], dst_dtype);
      } else {
        for (std::size_t i = begin; i < end; ++i) narrow(dst, dst_dtype, i, table[in[i]]);
      }
    });
    return;
  }
  // f32, bf16 or f16 -> fp8: exact widening to f32, then one rounding.
  for_chunks(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) out[i] = encode(widen(src, src_dtype, i), dst_dtype);
  });
}

}  // namespace detail
}  // namespace mixprec
