#pragma once
/// The Highway loops of pooling (pool_simd.cpp), each dispatched to the best target max_isa()
/// allows. Each call handles `planes` consecutive planes of a validated description (the
/// dispatcher, pool.cpp, splits planes over threads; the channels-last calls take one output
/// row of one sample). Max and average pooling give the
/// reference's bits on every target; plane_means sums across lanes (f32, another order).
#include <cstdint>

#include "kernels/conv.h"

namespace mixprec::kernels::cpu::pool_simd {

/// Max pooling of 2x2 windows, stride 2, no padding: rows read directly.
void max_pool_2x2(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax,
                  std::int64_t planes);
/// Max pooling of any window (overlapping, padded, strided) through padded f32 rows.
void max_pool_rows(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax,
                   std::int64_t planes);
/// Average pooling (count_include_pad = false) of any window.
void avg_pool_rows(const Pool2dDesc& d, const void* x, void* y, std::int64_t planes);
/// Its backward: dx overwritten with each dy / count spread over its window.
void avg_pool_backward_rows(const Pool2dDesc& d, const void* dy, void* dx, std::int64_t planes);
/// Channels-last (NHWC): output row oy of one sample (`sample` its [h, w, c] input; y_row and
/// argmax_row its wo * c outputs), lanes across channels; the reference's bits.
void max_pool_channels_last_row(const Pool2dDesc& d, const void* sample, std::int64_t oy,
                                void* y_row, std::int32_t* argmax_row);
/// Its backward for disjoint windows (stride >= kernel, no padding): writes every input pixel
/// of output row oy's windows in dx_sample (0 + dy at the argmax, +0 elsewhere); input pixels
/// in no window are left to the caller.
void max_pool_backward_channels_last_row(const Pool2dDesc& d, const void* dy_row,
                                         const std::int32_t* argmax_row, std::int64_t oy,
                                         void* dx_sample);
/// y[q] = mean of plane q of x (hw values), summed in f32 across lanes.
void plane_means(const void* x, DType t, std::int64_t planes, std::int64_t hw, void* y);

}  // namespace mixprec::kernels::cpu::pool_simd
