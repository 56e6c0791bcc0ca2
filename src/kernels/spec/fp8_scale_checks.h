#pragma once
/// The argument checks of the fp8 recipe kernels (fp8_scale.h), one copy for every backend's
/// host-side entry (the reference, cpu, cuda), so each refuses a bad call with the same message.
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::detail {

/// True for the two fp8 formats.
inline bool is_fp8_format(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }

inline void check_fp8_format(const char* op, DType format) {
  MIXPREC_CHECK(is_fp8_format(format), DTypeError, op,
                "format must be f8e4m3 or f8e5m2, got " << name(format));
}

inline void check_fp8_scaled_cast(DType x_dtype, const void* y, DType format, std::int64_t n,
                                  const float* scale, const float* amax) {
  constexpr const char* op = "fp8_scaled_cast";
  require_compute_dtype(op, x_dtype);
  check_fp8_format(op, format);
  MIXPREC_CHECK(n >= 0, ShapeError, op, "negative element count " << n);
  MIXPREC_CHECK(y == nullptr || scale != nullptr, ValueError, op, "a cast needs a scale pointer");
  MIXPREC_CHECK(y != nullptr || amax != nullptr, ValueError, op,
                "neither y nor amax given: the call would do nothing");
}

inline void check_fp8_scaled_cast_transpose(DType x_dtype, std::int64_t rows, std::int64_t cols,
                                            const void* yt, DType format, const float* scale) {
  constexpr const char* op = "fp8_scaled_cast_transpose";
  require_compute_dtype(op, x_dtype);
  check_fp8_format(op, format);
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative shape [" << rows << ", " << cols << "]");
  MIXPREC_CHECK(yt != nullptr, ValueError, op,
                "yt (the transposed output) is required; for y alone call fp8_scaled_cast");
  MIXPREC_CHECK(scale != nullptr, ValueError, op, "a cast needs a scale pointer");
}

/// The largest margin a recipe takes: 2^-64 already shrinks any amax far below fp8's range.
inline constexpr int kMaxFp8Margin = 64;

inline void check_fp8_scale_update(std::int64_t len, const float* amax, const float* scale,
                                   DType format, int margin) {
  constexpr const char* op = "fp8_scale_update";
  check_fp8_format(op, format);
  MIXPREC_CHECK(len >= 1, ValueError, op, "amax history length must be at least 1, got " << len);
  MIXPREC_CHECK(margin >= 0 && margin <= kMaxFp8Margin, ValueError, op,
                "margin must be in [0, " << kMaxFp8Margin << "], got " << margin);
  MIXPREC_CHECK(amax != nullptr && scale != nullptr, ValueError, op,
                "amax and scale pointers are required");
}

}  // namespace mixprec::kernels::detail
