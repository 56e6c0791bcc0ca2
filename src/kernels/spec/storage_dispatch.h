#pragma once
/// dispatch_storage(t, f): calls f(T{}) with the element type of dtype t, fp8 included
/// (float, bfloat16, float16, float8_e4m3, float8_e5m2). core/dtype.h's dispatch() refuses fp8:
/// it is for kernels that compute; this one is for conversions and copies, which move any
/// dtype. The types' conversions are constexpr, so the reference and the CUDA kernels both
/// write D(static_cast<float>(s)) with it. Header only; nvcc compiles it too.
#include "mixprec/core/dtype.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {

template <class F>
void dispatch_storage(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bfloat16{});
    case DType::f16: return f(float16{});
    case DType::f8e4m3: return f(float8_e4m3{});
    case DType::f8e5m2: return f(float8_e5m2{});
  }
}

}  // namespace mixprec::kernels
