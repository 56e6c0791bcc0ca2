#pragma once
/// The Highway loops of the direct convolution for few input channels (conv_direct_simd.cpp),
/// each dispatched to the best target max_isa() allows. They read the input of one sample as
/// zero-padded f32 planes (PaddedInput) and handle a block of kOutBlock output channels; the
/// dispatcher (conv_direct.cpp) pads, threads and finishes.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu::conv_direct_simd {

/// Output channels one call computes at once (one f32 vector accumulator each).
inline constexpr std::int64_t kOutBlock = 8;
/// At least the widest vector of any target (SVE's 2048 bits) in floats. Padded input rows
/// hold this many floats past the padded input, so a vector load at any output column plus any
/// kernel tap, or a vector store of the row's last input values, stays inside the row; the
/// weight gradient's dy rows are rounded up to a multiple of it.
inline constexpr std::int64_t kRowSlack = 64;

/// One sample's input, widened to f32 with `padding` zeros around it: plane c, row r (0 is
/// padding row -padding), column j (0 is input column -padding) at
/// data[(c * rows + r) * row + j]; columns past the padded input are zero.
struct PaddedInput {
  const float* data = nullptr;
  std::int64_t channels = 0, rows = 0, row = 0;
};

/// Fills out (channels * rows * row floats) as the PaddedInput of one sample whose planes
/// [channels][h][w] (dtype t) start at x, `padding` zeros on every side.
void pad_input(const void* x, DType t, std::int64_t h, std::int64_t w, std::int64_t padding,
               const PaddedInput& layout, float* out);

/// The shape of one stride-1 convolution as the loops see it.
struct Geometry {
  std::int64_t kh = 0, kw = 0, out_h = 0, out_w = 0;
};

/// y planes [block][out_h][out_w] (dtype t, plane stride out_h * out_w) of kOutBlock output
/// channels, `valid` of which are stored: y = sum over (c, ky, kx) of x * w, then + bias.
/// weights: [kOutBlock][channels * kh * kw] f32 (rows past `valid` are never read into y);
/// bias: kOutBlock f32.
void forward(const PaddedInput& x, const Geometry& g, const float* weights, const float* bias,
             void* y, DType t, std::int64_t valid);

/// Adds one sample's contribution to the weight gradient of kOutBlock output channels as
/// per-lane f32 partial sums: for each channel o < valid, row o * (taps + 1) + tap of partials
/// (taps = channels * kh * kw, rows kRowSlack floats apart, the target's lane count used)
/// gains the products dy * x of tap (c, ky, kx) over the output plane, lane by lane, and row
/// o * (taps + 1) + taps gains dy's plane (for the bias gradient). dy: `valid` planes of
/// out_h * out_w values (dtype t). scratch: kOutBlock * out_h * padded_out_w floats,
/// padded_out_w = out_w rounded up to kRowSlack.
void backward_weights(const PaddedInput& x, const Geometry& g, const void* dy, DType t,
                      std::int64_t valid, float* scratch, float* partials);

/// out[r] += the lanes of partials row r (r < rows) added in lane order, in f32, then widened:
/// the same lane count backward_weights used (one ISA per call of the dispatcher).
void fold_partials(const float* partials, std::int64_t rows, double* out);

}  // namespace mixprec::kernels::cpu::conv_direct_simd
