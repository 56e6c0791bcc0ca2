#pragma once
/// The column matrix of the CUDA convolutions (im2col / col2im) as index math, MIXPREC_HD so
/// that conv.cu's kernels are plain loops over it and a host program can check it against the
/// reference loops. One column per output pixel of the batch, j = (s * ho + oy) * wo + ox for
/// sample s; one row per weight tap, r = (c * kh + ky) * kw + kx, the flattening of an OIHW
/// weight's [c, kh, kw], so that weight [o, c*kh*kw] times the column matrix is the convolution
/// with one column of y per column j.
#include <cstdint>

#include "kernels/spec/host_device.h"

namespace mixprec::kernels::cuda {

/// A Conv2dDesc's extents, with its output extents, as a kernel argument.
struct ConvGeometry {
  std::int64_t c, h, w, o, kh, kw, stride, padding, ho, wo;

  /// Rows of the column matrix: the taps of one output channel.
  MIXPREC_HD std::int64_t taps() const { return c * kh * kw; }
  /// Columns of the column matrix per sample: the output pixels.
  MIXPREC_HD std::int64_t pixels() const { return ho * wo; }
};

/// The element of x [n, c, h, w] that column-matrix entry (r, j) holds, or -1 where the tap
/// falls in the zero padding.
MIXPREC_HD inline std::int64_t im2col_source(const ConvGeometry& g, std::int64_t r,
                                             std::int64_t j) {
  const std::int64_t kx = r % g.kw, ky = r / g.kw % g.kh, c = r / (g.kw * g.kh);
  const std::int64_t s = j / g.pixels(), pixel = j % g.pixels();
  const std::int64_t iy = pixel / g.wo * g.stride - g.padding + ky;
  const std::int64_t ix = pixel % g.wo * g.stride - g.padding + kx;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return -1;
  return ((s * g.c + c) * g.h + iy) * g.w + ix;
}

/// The element of y (or dy) [n, o, ho, wo] at output channel `o` of column j.
MIXPREC_HD inline std::int64_t output_index(const ConvGeometry& g, std::int64_t o,
                                            std::int64_t j) {
  const std::int64_t s = j / g.pixels(), pixel = j % g.pixels();
  return (s * g.o + o) * g.pixels() + pixel;
}

/// col2im in gather form: the gradient of x element (s, c, iy, ix) is the sum, in f32 and in
/// tap order (ky, kx), of the column-gradient entries im2col_source maps to it. at(r, j) reads
/// entry (r, j) of a column gradient whose first column is sample 0's first pixel (s and j
/// count from the same first sample), so no sum is split between two calls.
template <class At>
MIXPREC_HD inline float col2im_sum(const ConvGeometry& g, std::int64_t s, std::int64_t c,
                                   std::int64_t iy, std::int64_t ix, const At& at) {
  float sum = 0.0f;
  for (std::int64_t ky = 0; ky < g.kh; ++ky) {
    const std::int64_t ty = iy + g.padding - ky;  // oy * stride for the output row using this tap
    if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.ho) continue;
    for (std::int64_t kx = 0; kx < g.kw; ++kx) {
      const std::int64_t tx = ix + g.padding - kx;
      if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.wo) continue;
      sum += at((c * g.kh + ky) * g.kw + kx, (s * g.ho + ty / g.stride) * g.wo + tx / g.stride);
    }
  }
  return sum;
}

}  // namespace mixprec::kernels::cuda
