#pragma once
/// The per-window math of 2-D pooling, written once for host and device (MIXPREC_HD): the
/// reference loops (ref/pool_ref.cpp) and the CUDA kernels (cuda/pool.cu) call these, so a
/// window's maximum, its NaN rule and its mean are the same operations in the same order on
/// both. Values are f32; at(i) returns element i of one input plane widened to f32.
#include <cstdint>

#include "kernels/conv.h"
#include "kernels/spec/host_device.h"

namespace mixprec::kernels::pool {

/// A half-open range [begin, end) of rows or columns.
struct Span {
  std::int64_t begin, end;
};

/// The input rows [begin, end) (columns likewise) of the window of output row `out`, the
/// padding cut off; never empty, since validate_pool2d keeps padding <= kernel / 2.
MIXPREC_HD inline Span window(std::int64_t out, const Pool2dDesc& d, std::int64_t extent) {
  const std::int64_t start = out * d.stride - d.padding;
  const std::int64_t stop = start + d.kernel;
  return {start > 0 ? start : 0, stop < extent ? stop : extent};
}

/// The number of non-padding elements of a window, the divisor of average pooling
/// (count_include_pad = false).
MIXPREC_HD inline float window_count(Span ry, Span rx) {
  return static_cast<float>((ry.end - ry.begin) * (rx.end - rx.begin));
}

/// The plane index (row * w + col) of the window's first maximum in row-major order. A NaN wins
/// (the first NaN, and the scan stops there), so NaN propagates; ties keep the earlier element.
template <class At>
MIXPREC_HD inline std::int64_t window_argmax(Span ry, Span rx, std::int64_t w, const At& at) {
  std::int64_t best_i = ry.begin * w + rx.begin;
  float best = at(best_i);
  for (std::int64_t iy = ry.begin; iy < ry.end && best == best; ++iy) {
    for (std::int64_t ix = rx.begin; ix < rx.end; ++ix) {
      const float v = at(iy * w + ix);
      if (v > best || v != v) {  // strictly greater keeps the first max; NaN wins once
        best = v;
        best_i = iy * w + ix;
        if (v != v) break;
      }
    }
  }
  return best_i;
}

/// The mean of the window's elements, summed in f32 in row-major order.
template <class At>
MIXPREC_HD inline float window_mean(Span ry, Span rx, std::int64_t w, const At& at) {
  float sum = 0.0f;
  for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
    for (std::int64_t ix = rx.begin; ix < rx.end; ++ix) sum += at(iy * w + ix);
  }
  return sum / window_count(ry, rx);
}

/// The output rows [begin, end) whose windows hold input row `in` (columns likewise), clipped
/// to [0, out_extent): the backward passes in gather form, where each input element visits the
/// windows that cover it in row-major order, the order in which the reference's scatter loop
/// adds their contributions.
MIXPREC_HD inline Span covering(std::int64_t in, const Pool2dDesc& d, std::int64_t out_extent) {
  // Output row o covers `in` iff o * stride - padding <= in < o * stride - padding + kernel.
  const std::int64_t last = (in + d.padding) / d.stride;  // in + padding >= 0
  const std::int64_t below = in + d.padding - d.kernel;   // o covers `in` iff o * stride > below
  const std::int64_t first = below < 0 ? 0 : below / d.stride + 1;
  return {first, last + 1 < out_extent ? last + 1 : out_extent};
}

/// Where pooled element i ([n, c, ho, wo], or [n, ho, wo, c] channels-last) sits: its output row
/// and column.
struct PooledAt {
  std::int64_t oy, ox;
};
/// Pool2dDesc::out_h and out_w's extent for an input extent `in`, callable in device code (the
/// descriptor's members are host functions: contract headers see no MIXPREC_HD).
MIXPREC_HD inline std::int64_t pooled_extent(const Pool2dDesc& d, std::int64_t in) {
  return (in + 2 * d.padding - d.kernel) / d.stride + 1;
}
MIXPREC_HD inline PooledAt pooled_at(const Pool2dDesc& d, std::int64_t i) {
  const std::int64_t ho = pooled_extent(d, d.h), wo = pooled_extent(d, d.w);
  if (d.channels_last) {
    const std::int64_t pixel = i / d.c;
    return {(pixel / wo) % ho, pixel % wo};
  }
  return {(i / wo) % ho, i % wo};
}

/// The plane index (row * w + col), as max_pool2d's argmax, of window-local index q (row-major
/// within the window) of pooled element i, for windows that tile the image (stride = kernel,
/// no padding: batch_norm_relu_max_pool2d's byte argmax).
MIXPREC_HD inline std::int32_t plane_index_of(const Pool2dDesc& d, std::int64_t i, std::int64_t q) {
  const PooledAt p = pooled_at(d, i);
  return static_cast<std::int32_t>((p.oy * d.kernel + q / d.kernel) * d.w + p.ox * d.kernel +
                                   q % d.kernel);
}

/// The window-local index of plane index `plane` in pooled element i's window (the inverse).
MIXPREC_HD inline std::uint8_t window_index_of(const Pool2dDesc& d, std::int64_t i,
                                               std::int32_t plane) {
  const PooledAt p = pooled_at(d, i);
  return static_cast<std::uint8_t>((plane / d.w - p.oy * d.kernel) * d.kernel + plane % d.w -
                                   p.ox * d.kernel);
}

}  // namespace mixprec::kernels::pool
