#pragma once
// The host's element types for every dtype (float, bfloat16, float16, float8_e4m3, float8_e5m2)
// as kernel template arguments, fp8 included, and same-size unsigned words for kernels that only
// move bits. The types' conversions are constexpr (core/half.h, core/float8.h), so a kernel can
// write the reference's own expression D(static_cast<float>(s)): exact widening, one rounding to
// nearest even, fp8 overflow as float8.h says. Included by .cu files only.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels::cuda {

/// Calls f(T{}) with the element type of dtype t, fp8 included (dispatch() refuses fp8: it is
/// for kernels that compute; this one is for conversions and copies).
template <class F>
void with_storage_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bfloat16{});
    case DType::f16: return f(float16{});
    case DType::f8e4m3: return f(float8_e4m3{});
    case DType::f8e5m2: return f(float8_e5m2{});
  }
}

/// Calls f(W{}) with the unsigned word of `bytes` bytes (1, 2 or 4: every dtype's size).
template <class F>
void with_word_of_size(std::size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    default: return f(std::uint32_t{});
  }
}

}  // namespace mixprec::kernels::cuda
