#pragma once
/// The Highway building blocks of batch norm / layer norm (norm_simd.cpp), each dispatched to
/// the best target max_isa() allows. A rows_* call handles a set of strided rows (a channel of
/// batch norm, a row of layer norm), a cols_* or ln_* call one contiguous run of `len` values;
/// the dispatcher (norm.cpp) chooses the sets and runs and threads them.
/// Inputs and outputs are f32, bf16 or f16 (never fp8: the caller checks); x and dy may differ.
/// "cols" functions work per column against f32 arrays of len values (accumulators or
/// per-column parameters), over a block of rows.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu::norm_simd {

/// Longest run of one row summed in f32 before the sum is widened to double.
inline constexpr std::int64_t kRun = 4096;

/// `rows` runs of `len` values of dtype t, run r at element r * stride of p: one channel's rows
/// of an [n, c, s] tensor (stride c * s), a scratch of its own (stride s), or a single row. The
/// rows_* functions below take a whole set in one dispatched call and prefetch the rows ahead of
/// the one they work on, in every stream (the rows of a channel are short runs a whole sample
/// apart, which the hardware prefetcher follows badly), so a channel costs one call per pass.
struct Rows {
  const void* p;
  DType t;
  std::int64_t stride;
};
struct MutableRows {
  void* p;
  DType t;
  std::int64_t stride;
};
struct RowsShape {
  std::int64_t rows, len;
};

/// Sum of every value: each row's runs of at most kRun summed in f32 and added in double, the
/// rows' double sums added in row order.
double rows_sum(Rows x, RowsShape shape);
/// The same for (x - mean)^2.
double rows_sq_dev_sum(Rows x, RowsShape shape, float mean);
/// Adds sum g and sum g * (x - mean) into *sum_dy and *sum_dy_xmu, one f32 run (at most kRun
/// values) at a time in row order. g is dy, or with relu_y (not null: dy's dtype and stride)
/// dy passed back through a ReLU whose output was relu_y: dy where relu_y > 0, else 0.
void rows_backward_sums(Rows x, Rows dy, const void* relu_y, RowsShape shape, float mean,
                        double* sum_dy, double* sum_dy_xmu);
/// y = (x - mean) * scale + shift, rounded to y's dtype; with relu, then ReLU of the rounded
/// value (the batch_norm and relu ops' bits: norm_math::batch_norm_epilogue without residual).
void rows_affine(Rows x, RowsShape shape, float mean, float scale, float shift, bool relu,
                 MutableRows y);
/// dx = g * k1 + ((x - mean) * k2 + k3), g as in rows_backward_sums.
void rows_backward_dx(Rows x, Rows dy, const void* relu_y, RowsShape shape, float mean,
                      float k1, float k2, float k3, MutableRows dx);

// The cols_* functions take `rows` rows of `len` values, row r at element r * stride (a block
// of an [N, C*s] input: one call per block, not per row, since channels-last activations make
// every row as short as C).
/// acc[j] += x[r, j] for each row in order, or += (x[r, j] - mean[j])^2 when mean is not null.
void cols_acc(const void* x, DType t, std::int64_t rows, std::int64_t stride, std::int64_t len,
              const float* mean, float* acc);
/// acc_dy[j] += g[r, j]; acc_dy_xmu[j] += g[r, j] * (x[r, j] - mean[j]), rows in order; g as
/// in rows_backward_sums (relu_y, when not null, has dy's dtype and layout).
void cols_backward_acc(const void* x, DType tx, const void* dy, DType tdy, const void* relu_y,
                       std::int64_t rows, std::int64_t stride, std::int64_t len,
                       const float* mean, float* acc_dy, float* acc_dy_xmu);
/// y[r, j] = (x[r, j] - mean[j]) * scale[j] + shift[j]; with relu, then ReLU of the rounded
/// value, as rows_affine.
void cols_affine(const void* x, DType tx, std::int64_t rows, std::int64_t stride,
                 std::int64_t len, const float* mean, const float* scale, const float* shift,
                 bool relu, void* y, DType ty);
/// dx[r, j] = g[r, j] * k1[j] + ((x[r, j] - mean[j]) * k2[j] + k3[j]), g as in cols_backward_acc.
void cols_backward_dx(const void* x, DType tx, const void* dy, DType tdy, const void* relu_y,
                      std::int64_t rows, std::int64_t stride, std::int64_t len,
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
