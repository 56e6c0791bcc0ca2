// The fp8 decode tables, built at compile time from float8.h's scalar decoders.
#include "mixprec/core/fp8_table.h"

#include <cstdint>
#include <string>

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

}  // namespace

namespace detail {

void require_fp8_format(const char* op, DType format) {
  const bool known = static_cast<std::size_t>(format) < kDTypeTable.size();
  MIXPREC_CHECK(format == DType::f8e4m3 || format == DType::f8e5m2, DTypeError, op,
                "format must be f8e4m3 or f8e5m2, got "
                    << (known ? std::string(name(format))
                              : "dtype code " + std::to_string(static_cast<int>(format))));
}

}  // namespace detail

const std::array<float, 256>& fp8_decode_table(DType format) {
  detail::require_fp8_format("fp8_decode_table", format);
  return format == DType::f8e4m3 ? kE4M3Table : kE5M2Table;
}

}  // namespace mixprec
