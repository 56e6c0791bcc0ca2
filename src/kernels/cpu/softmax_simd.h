#pragma once
/// Entry points of the Highway softmax / cross-entropy row kernels (softmax_simd.cpp), each
/// dispatched to the best target Highway allows at run time (Isa cap included). Each works on
/// n consecutive elements of one row, in f32 whatever the storage dtype (f32, bf16 or f16);
/// softmax.cpp cuts rows into chunks and combines the partial sums in a fixed order.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu {

/// The largest element, NaN if any element is NaN; -Inf for n == 0.
float simd_row_max(DType dt, const void* x, std::int64_t n);
/// *sum_exp = sum exp(x - m); when non-null, *sum_shifted = sum (x - m) and e_out[i] = exp(x_i - m).
/// m must be finite and >= every x_i.
void simd_exp_stats(DType dt, const void* x, std::int64_t n, float m, float* sum_exp,
                    float* sum_shifted, float* e_out);
/// y = e * inv, with e the exps simd_exp_stats stored or, when e is null, exp(x - m) again.
void simd_softmax_out(DType dti, const void* x, std::int64_t n, float m, float inv,
                      const float* e, DType dto, void* y);
/// y = (x - m) - lse.
void simd_log_softmax_out(DType dti, const void* x, std::int64_t n, float m, float lse, DType dto,
                          void* y);
/// out = g * (exp(x - m) * inv - q) with q = q_on at element t (t < 0 or t >= n: none), else q_off.
void simd_cross_entropy_back_out(DType dti, const void* x, std::int64_t n, float m, float inv,
                                 float g, float q_off, float q_on, std::int64_t t, DType dto,
                                 void* out);
/// sum dy * y, or sum dy when y is null.
float simd_back_dot(DType dty, const void* y, DType dtg, const void* dy, std::int64_t n);
/// softmax: dx = y * (dy - s); log-softmax (log): dx = dy - exp(y) * s.
void simd_back_out(DType dty, const void* y, DType dtg, const void* dy, std::int64_t n, float s,
                   bool log, DType dto, void* dx);

}  // namespace mixprec::kernels::cpu
