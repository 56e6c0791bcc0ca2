// The direct few-channel convolution's dispatcher: widens the weights (and bias) to f32 once per
// call, pads each sample's input planes into per-thread f32 scratch, and spreads fixed tasks
// over threads: forward by sample; the weight gradient by (run of samples, block of output
// channels), each task keeping per-lane f32 sums over its run that are folded to double and
// added in run order, so the result does not depend on the thread count.
#include "kernels/cpu/conv_direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu/conv_direct_simd.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/growing_buffer.h"

namespace mixprec::kernels::cpu {
namespace {

namespace simd = conv_direct_simd;
using simd::kOutBlock;

/// Samples one weight-gradient task sums before its partial is set aside (fixed, so the order
/// of the double additions is too).
constexpr std::int64_t kSampleRun = 16;

std::int64_t blocks_of(std::int64_t o) { return (o + kOutBlock - 1) / kOutBlock; }

simd::Geometry geometry(const Conv2dDesc& d) {
  return {d.kh, d.kw, d.out_h(), d.out_w()};
}

/// Floats per padded input row (see simd::PaddedInput).
std::int64_t padded_row(const Conv2dDesc& d) { return d.w + 2 * d.padding + simd::kRowSlack; }

/// Sample n of x, widened and zero-padded into buf (grown as needed).
simd::PaddedInput pad_sample(const Conv2dDesc& d, const void* x, std::int64_t n,
                             GrowingBuffer& buf) {
  simd::PaddedInput p;
  p.channels = d.c;
  p.rows = d.h + 2 * d.padding;
  p.row = padded_row(d);
  float* out = buf.get(static_cast<std::size_t>(p.channels * p.rows * p.row));
  simd::pad_input(at(x, d.dtype, n * d.c * d.h * d.w), d.dtype, d.h, d.w, d.padding, p, out);
  p.data = out;
  return p;
}

/// `values` [o][per] widened to f32 rows, zero rows up to a whole number of blocks.
std::vector<float> widen_blocks(const void* values, DType t, std::int64_t o, std::int64_t per) {
  std::vector<float> out(static_cast<std::size_t>(blocks_of(o) * kOutBlock * per), 0.0f);
  if (values != nullptr) kernels::convert(values, t, out.data(), DType::f32, static_cast<std::size_t>(o * per));
  return out;
}

}  // namespace

bool conv_direct_covers(ConvPass pass, const Conv2dDesc& d) {
  const bool dtype_ok = d.dtype == DType::f32 || d.dtype == DType::bf16 || d.dtype == DType::f16;
  const bool extents = d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0 && d.o > 0;
  // NCHW only: its lanes run along an output row of one channel.
  return pass != ConvPass::backward_data && d.stride == 1 && d.c <= kDirectMaxChannels &&
         dtype_ok && extents && !d.channels_last;
}

void conv_direct_forward(const Conv2dDesc& d, const void* x, const void* weight,
                         const void* bias, void* y) {
  const std::int64_t taps = d.c * d.kh * d.kw, plane = d.out_h() * d.out_w();
  const std::vector<float> w = widen_blocks(weight, d.dtype, d.o, taps);
  const std::vector<float> b =
      widen_blocks(d.has_bias ? bias : nullptr, d.bias_dtype, d.o, 1);
  const simd::Geometry g = geometry(d);
  parallel_for(d.n, d.n * d.o * plane * taps >= kParallelMinWork, [&](std::int64_t n) {
    thread_local GrowingBuffer padded;
    const simd::PaddedInput p = pad_sample(d, x, n, padded);
    for (std::int64_t o0 = 0; o0 < d.o; o0 += kOutBlock) {
      simd::forward(p, g, w.data() + o0 * taps, b.data() + o0,
                    at(y, d.dtype, (n * d.o + o0) * plane), d.dtype,
                    std::min(kOutBlock, d.o - o0));
    }
  });
}

void conv_direct_backward_weights(const Conv2dDesc& d, const void* x, const void* dy,
                                  void* dweight, void* dbias) {
  const std::int64_t taps = d.c * d.kh * d.kw, plane = d.out_h() * d.out_w();
  const simd::Geometry g = geometry(d);
  const std::int64_t blocks = blocks_of(d.o), runs = (d.n + kSampleRun - 1) / kSampleRun;
  const std::int64_t pw = (g.out_w + simd::kRowSlack - 1) / simd::kRowSlack * simd::kRowSlack;
  // Per (run, block) task: kOutBlock rows of taps + 1 sums (the taps', then the bias's), in
  // double; each task's f32 lane partials cover one run of samples.
  const std::int64_t rows = kOutBlock * (taps + 1);
  std::vector<double> parts(static_cast<std::size_t>(runs * blocks * rows), 0.0);
  parallel_for(runs * blocks, d.n * d.o * plane * taps >= kParallelMinWork,
               [&](std::int64_t task) {
    thread_local GrowingBuffer padded, scratch, partials;
    const std::int64_t run = task / blocks, o0 = (task % blocks) * kOutBlock;
    float* grad = scratch.get(static_cast<std::size_t>(kOutBlock * g.out_h * pw));
    float* lanes = partials.get(static_cast<std::size_t>(rows * simd::kRowSlack));
    std::fill(lanes, lanes + rows * simd::kRowSlack, 0.0f);
    const std::int64_t valid = std::min(kOutBlock, d.o - o0);
    for (std::int64_t n = run * kSampleRun; n < std::min(d.n, (run + 1) * kSampleRun); ++n) {
      const simd::PaddedInput p = pad_sample(d, x, n, padded);
      simd::backward_weights(p, g, at(dy, d.dtype, (n * d.o + o0) * plane), d.dtype, valid,
                             grad, lanes);
    }
    simd::fold_partials(lanes, rows, parts.data() + task * rows);
  });
  std::vector<float> dw(static_cast<std::size_t>(d.o * taps)), db(static_cast<std::size_t>(d.o));
  for (std::int64_t o = 0; o < d.o; ++o) {
    const std::int64_t block = o / kOutBlock, row0 = (o % kOutBlock) * (taps + 1);
    for (std::int64_t t = 0; t <= taps; ++t) {
      double sum = 0.0;
      for (std::int64_t run = 0; run < runs; ++run) sum += parts[static_cast<std::size_t>((run * blocks + block) * rows + row0 + t)];
      (t < taps ? dw[static_cast<std::size_t>(o * taps + t)] : db[static_cast<std::size_t>(o)]) =
          static_cast<float>(sum);
    }
  }
  kernels::convert(dw.data(), DType::f32, dweight, d.dtype, dw.size());
  if (dbias != nullptr) kernels::convert(db.data(), DType::f32, dbias, d.bias_dtype, db.size());
}

}  // namespace mixprec::kernels::cpu
