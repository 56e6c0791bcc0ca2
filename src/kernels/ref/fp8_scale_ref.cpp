// Reference fp8 recipe kernels: the contract of fp8_scale.h, element by element, in order.
#include <algorithm>
#include <bit>
#include <cstdint>

#include "kernels/fp8_scale.h"
#include "kernels/spec/fp8_scale_checks.h"
#include "kernels/spec/fp8_scale_math.h"

namespace mixprec::kernels::ref {

void fp8_scaled_cast(const void* x, DType x_dtype, void* y, DType format, std::int64_t n,
                     const float* scale, float* amax) {
  detail::check_fp8_scaled_cast(x_dtype, y, format, n, scale, amax);
  const bool e4m3 = format == DType::f8e4m3;
  auto* out = static_cast<std::uint8_t*>(y);
  const float s = out != nullptr ? *scale : 1.0f;
  std::uint32_t m = 0;
  dispatch(x_dtype, [&](auto t) {
    const auto* in = static_cast<const decltype(t)*>(x);
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(in[i]);
      m = std::max(m, fp8_math::abs_bits(v));
      if (out != nullptr) out[i] = fp8_math::scaled_cast(v, s, e4m3);
    }
  });
  if (amax != nullptr) *amax = std::bit_cast<float>(m);
}

void fp8_scaled_cast_transpose(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                               void* y, void* yt, DType format, const float* scale, float* amax) {
  detail::check_fp8_scaled_cast_transpose(x_dtype, rows, cols, yt, format, scale);
  const bool e4m3 = format == DType::f8e4m3;
  auto* out = static_cast<std::uint8_t*>(y);
  auto* out_t = static_cast<std::uint8_t*>(yt);
  const float s = *scale;
  std::uint32_t m = 0;
  dispatch(x_dtype, [&](auto t) {
    const auto* in = static_cast<const decltype(t)*>(x);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const float v = static_cast<float>(in[r * cols + c]);
        m = std::max(m, fp8_math::abs_bits(v));
        const std::uint8_t b = fp8_math::scaled_cast(v, s, e4m3);
        if (out != nullptr) out[r * cols + c] = b;
        out_t[c * rows + r] = b;
      }
    }
  });
  if (amax != nullptr) *amax = std::bit_cast<float>(m);
}

void fp8_scale_update(float* history, std::int64_t len, const float* amax, float* scale,
                      DType format, int margin, float* found_inf) {
  detail::check_fp8_scale_update(len, amax, scale, format, margin);
  const float a = *amax;
  if (!fp8_math::amax_is_finite(a)) {
    if (found_inf != nullptr) *found_inf = 1.0f;
    return;
  }
  for (std::int64_t i = len - 1; i > 0; --i) history[i] = history[i - 1];
  history[0] = a;
  float window = 0.0f;
  for (std::int64_t i = 0; i < len; ++i) window = std::max(window, history[i]);
  *scale = fp8_math::updated_scale(window, *scale, fp8_math::fp8_max(format == DType::f8e4m3),
                                   margin);
}

}  // namespace mixprec::kernels::ref
