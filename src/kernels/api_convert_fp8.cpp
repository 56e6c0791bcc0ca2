// The public fp8 bulk conversions (mixprec/kernels/convert_arrays.h): argument checks in front of
// the backend's bulk conversion (kernels::convert, which handles every dtype pair, fp8 included).
#include "mixprec/kernels/convert_arrays.h"

#include <cstdint>
#include <string>

#include "kernels/convert_checks.h"
#include "kernels/convert.h"
#include "mixprec/core/error.h"

namespace mixprec {
namespace {

using Byte = std::uint8_t;

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
