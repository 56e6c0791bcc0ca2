#pragma once
/// The Highway rows of the fused batch norm + ReLU + max pool on channels-last activations
/// (norm_pool_simd.cpp, dispatched to the best target max_isa() allows). One call handles one
/// window row of one sample: the `kernel` input rows that its output row pools, lanes across
/// channels. norm_pool.cpp threads the window rows and combines the gradient sums.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu::norm_pool_simd {

/// One window row: x points at its first input row ([w, c] values of dtype t, the next input row
/// w * c values on); per-channel f32 mean, scale (invstd * weight) and shift (bias) (the
/// backward reads only mean).
struct WindowRow {
  const void* x;
  DType t;
  std::int64_t w, c, kernel;
  const float* mean;
  const float* scale;
  const float* shift;
};

/// y_row[ox, j] (dtype t, w / kernel pixels of c values): the maximum over window ox of
/// relu(round_t((x - mean) * scale + shift)), batch_norm_relu's values in max_pool2d's order
/// (first maximum, first NaN); argmax_row[ox, j] (if not null): its row-major index in the window.
void forward_row(const WindowRow& r, void* y_row, std::uint8_t* argmax_row);

/// Adds into acc_g[j] and acc_gx[j] (f32), window by window, the gradient batch norm sees at
/// each pixel, g = 0 + dy at the window's argmax where the pooled y > 0 (the ReLU) and +0
/// elsewhere, and g * (x - mean[j]); y_row, argmax_row and dy_row are the pooled rows.
void backward_sums_row(const WindowRow& r, const void* y_row, const std::uint8_t* argmax_row,
                       const void* dy_row, float* acc_g, float* acc_gx);

/// dx for the window row's input rows (dx_rows laid out as x, dtype t): g * k1 + ((x - mean) *
/// k2 + k3) at every pixel, g as in backward_sums_row.
void backward_dx_row(const WindowRow& r, const void* y_row, const std::uint8_t* argmax_row,
                     const void* dy_row, const float* k1, const float* k2, const float* k3,
                     void* dx_rows);

}  // namespace mixprec::kernels::cpu::norm_pool_simd
