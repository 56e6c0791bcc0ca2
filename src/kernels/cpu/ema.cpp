// cpu EMA update: one streaming pass in fixed chunks on all threads (elements are independent,
// so threads change nothing). The loop is the reference's; GCC vectorises it, widening bf16/f16
// exactly, and -ffp-contract=off keeps its three roundings.
#include "kernels/cpu/dispatch_util.h"
#include "kernels/ema.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cpu {

void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a) {
  require_compute_dtype("ema_update", param_dtype);  // fp8 calls run the reference (cpu_backend.cpp)
  MIXPREC_CHECK(n >= 0, ShapeError, "ema_update", "negative element count " << n);
  log_simd("ema_update", name(param_dtype));
  dispatch(param_dtype, [&](auto t) {
    const auto* p = static_cast<const decltype(t)*>(param);
    parallel_chunks(n, 65536, [&](std::int64_t begin, std::int64_t len) {
      for (std::int64_t i = begin; i < begin + len; ++i) {
        shadow[i] += a * (static_cast<float>(p[i]) - shadow[i]);
      }
    });
  });
}

}  // namespace mixprec::kernels::cpu
