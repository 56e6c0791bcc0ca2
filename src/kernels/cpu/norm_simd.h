#pragma once
/// The Highway building blocks of batch norm / layer norm (norm_simd.cpp), each dispatched to
/// the best target max_isa() allows. One call handles one contiguous run of `len` values; the
/// dispatcher (norm.cpp) chooses the runs, adds their f32 sums in double and threads them.
/// Inputs and outputs are f32, bf16 or f16 (never fp8: the caller checks); x and dy may differ.
/// "cols" functions work per column against f32 arrays of len values (accumulators or
/// per-column parameters).
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu::norm_simd {

/// Sum of x[0..len) in f32.
float row_sum(const void* x, DType t, std::int64_t len);
/// Sum of (x - mean)^2 in f32.
float row_sq_dev_sum(const void* x, DType t, std::int64_t len, float mean);
/// *sum_dy = sum dy, *sum_dy_xmu = sum dy * (x - mean), in f32.
void row_backward_sums(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                       float mean, float* sum_dy, float* sum_dy_xmu);
/// y = (x - mean) * scale + shift.
void row_affine(const void* x, DType tx, std::int64_t len, float mean, float scale, float shift,
                void* y, DType ty);
/// dx = dy * k1 + ((x - mean) * k2 + k3).
void row_backward_dx(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                     float mean, float k1, float k2, float k3, void* dx, DType tdx);

/// acc[j] += x[j], or += (x[j] - mean[j])^2 when mean is not null.
void cols_acc(const void* x, DType t, std::int64_t len, const float* mean, float* acc);
/// acc_dy[j] += dy[j]; acc_dy_xmu[j] += dy[j] * (x[j] - mean[j]).
void cols_backward_acc(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                       const float* mean, float* acc_dy, float* acc_dy_xmu);
/// y[j] = (x[j] - mean[j]) * scale[j] + shift[j].
void cols_affine(const void* x, DType tx, std::int64_t len, const float* mean,
                 const float* scale, const float* shift, void* y, DType ty);
/// dx[j] = dy[j] * k1[j] + ((x[j] - mean[j]) * k2[j] + k3[j]).
void cols_backward_dx(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                      const float* mean, const float* k1, const float* k2, const float* k3,
                      void* dx, DType tdx);

/// Layer norm row: y[j] = ((x[j] - mean) * rstd) * weight[j] + bias[j] (both not null).
void ln_row_affine(const void* x, DType tx, std::int64_t len, float mean, float rstd,
                   const float* weight, const float* bias, void* y, DType ty);
/// With g = dy * weight[j], xhat = (x - mean) * rstd: *sum_g = sum g, *sum_g_xhat = sum g*xhat.
void ln_row_backward_sums(const void* x, DType tx, const void* dy, DType tdy,
                          const float* weight, std::int64_t len, float mean, float rstd,
                          float* sum_g, float* sum_g_xhat);
/// dx[j] = rstd * (g - a - xhat * b), g and xhat as above.
void ln_row_backward_dx(const void* x, DType tx, const void* dy, DType tdy, const float* weight,
                        std::int64_t len, float mean, float rstd, float a, float b, void* dx,
                        DType tdx);
/// acc_w[j] += dy[j] * ((x[j] - mean) * rstd); acc_b[j] += dy[j].
void ln_cols_acc(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                 float mean, float rstd, float* acc_w, float* acc_b);

}  // namespace mixprec::kernels::cpu::norm_simd
