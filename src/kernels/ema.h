#pragma once
/// The EMA-of-weights update as a backend kernel (optim::EMA): kernels::ref:: is the spec,
/// kernels:: dispatches to the active backend.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels {

/// shadow[i] += a * (param[i] - shadow[i]) over n elements, in f32: param of any compute dtype
/// (widened exactly), three roundings (no fused multiply-add), shadow updated in place.
/// Elements are independent, so no backend's threads or vector width can change a result.
void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a);

namespace ref {
void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a);
}  // namespace ref

namespace cpu {
void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a);
}  // namespace cpu

}  // namespace mixprec::kernels
