// Reference EMA update: the formula of ema.h, element by element.
#include "kernels/ema.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::ref {

void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a) {
  MIXPREC_CHECK(n >= 0, ShapeError, "ema_update", "negative element count " << n);
  dispatch(param_dtype, [&](auto t) {
    const auto* p = static_cast<const decltype(t)*>(param);
    for (std::int64_t i = 0; i < n; ++i) shadow[i] += a * (static_cast<float>(p[i]) - shadow[i]);
  });
}

}  // namespace mixprec::kernels::ref
