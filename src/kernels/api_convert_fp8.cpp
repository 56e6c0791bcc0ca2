// The public fp8 bulk conversions (mixprec/kernels/convert_arrays.h): argument checks in front of
// the backend's bulk conversion (kernels::convert, which handles every dtype pair, fp8 included).
#include "mixprec/kernels/convert_arrays.h"

#include <cstdint>

#include "kernels/convert_checks.h"
#include "kernels/convert.h"
#include "mixprec/core/fp8_table.h"

namespace mixprec {

using Byte = std::uint8_t;

void convert_fp8_to_f32(const Byte* src, DType format, float* dst, std::size_t n) {
  constexpr const char* op = "convert_fp8_to_f32";
  detail::require_fp8_format(op, format);
  detail::check_convert_buffers(op, src, 1, dst, 4, n);
  kernels::convert(src, format, dst, DType::f32, n);
}

void convert_f32_to_fp8(const float* src, Byte* dst, DType format, std::size_t n) {
  constexpr const char* op = "convert_f32_to_fp8";
  detail::require_fp8_format(op, format);
  detail::check_convert_buffers(op, src, 4, dst, 1, n);
  kernels::convert(src, DType::f32, dst, format, n);
}

}  // namespace mixprec
