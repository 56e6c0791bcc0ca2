// The public fp8 conversions: the 256-entry decode tables, and argument checks in front of the
// backend's bulk conversion (kernels::convert, which handles every dtype pair, fp8 included).
#include "mixprec/core/convert_fp8.h"

#include <cstdint>
#include <string>

#include "kernels/convert_checks.h"
#include "kernels/convert.h"
#include "mixprec/core/error.h"
#include "mixprec/core/float8.h"

namespace mixprec {
namespace {

using Byte = std::uint8_t;

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

}  // namespace

const std::array<float, 256>& fp8_decode_table(DType format) {
  require_fp8("fp8_decode_table", format);
  return format == DType::f8e4m3 ? kE4M3Table : kE5M2Table;
}

void convert_fp8_to_f32(const Byte* src, DType format, float* dst, std::size_t n) {
  constexpr const char* op = "convert_fp8_to_f32";
  require_fp8(op, format);
  detail::check_convert_buffers(op, src, 1, dst, 4, n);
  kernels::convert(src, format, dst, DType::f32, n);
}

void convert_f32_to_fp8(const float* src, Byte* dst, DType format, std::size_t n) {
  constexpr const char* op = "convert_f32_to_fp8";
  require_fp8(op, format);
  detail::check_convert_buffers(op, src, 4, dst, 1, n);
  kernels::convert(src, DType::f32, dst, format, n);
}

}  // namespace mixprec
