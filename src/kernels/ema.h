#pragma once
/// The EMA-of-weights update as a backend kernel (optim::EMA): kernels::ref:: is the spec,
/// kernels:: dispatches to the active backend.
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// shadow[i] += a * (param[i] - shadow[i]) over n elements, in f32: param of any compute dtype
/// (widened exactly), three roundings (no fused multiply-add), shadow updated in place.
/// Elements are independent, so no backend's threads or vector width can change a result.
void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a);
}  // namespace ref

/// The ema kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_EMA_KERNELS(X) X(ema_update)
MIXPREC_EMA_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
