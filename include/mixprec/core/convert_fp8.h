#pragma once
/// Bulk conversions to and from the fp8 storage dtypes, bit-identical to the scalar reference of
/// float8.h (decode exact; encode rounds to nearest even, OCP non-saturating overflow:
/// E4M3 -> NaN, E5M2 -> Inf). Like convert() in convert.h (which takes any pair with an fp8
/// side too), they run the backend's bulk conversion: vectorised and threaded on the cpu
/// backend. fp8_decode_table() is the same decoding as a 256-entry table.
#include <array>
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec {

/// The 256 f32 values of an fp8 format indexed by bit pattern (NaN patterns hold quiet NaNs of
/// their sign). DTypeError unless format is f8e4m3 or f8e5m2.
const std::array<float, 256>& fp8_decode_table(DType format);

/// fp8 -> f32 through the decode table: exact. DTypeError unless format is an fp8 dtype;
/// ValueError on null or overlapping buffers.
void convert_fp8_to_f32(const std::uint8_t* src, DType format, float* dst, std::size_t n);

/// f32 -> fp8 with one rounding to nearest even; NaN -> NaN, overflow -> NaN (E4M3) or Inf
/// (E5M2), subnormals kept. DTypeError unless format is an fp8 dtype; ValueError on null or
/// overlapping buffers.
void convert_f32_to_fp8(const float* src, std::uint8_t* dst, DType format, std::size_t n);

}  // namespace mixprec
