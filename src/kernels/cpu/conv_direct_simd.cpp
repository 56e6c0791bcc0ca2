// The direct convolution's vector loops, written once over Highway and compiled for every
// target. Lanes run along one output row; each of kOutBlock output channels keeps one f32
// vector of sums, and each kernel tap loads one vector of the padded input row (shifted by the
// tap's column) and adds it, times the channel's weight broadcast, into all of them. With one
// to four input channels there are only c * kh * kw taps (9 for a grayscale 3x3 layer), so
// the work is the output's size times the taps: this beats oneDNN's im2col/blocked kernels,
// which pad the channels to 16 and reorder around every call (see conv_direct.cpp).
//
// Numerics: every output is one f32 sum over its taps in the reference's order (c, ky, kx),
// with an FMA per term, then + bias, rounded once to the output dtype. The weight gradient of
// each (channel, tap) is an f32 vector sum over one sample's output plane, folded in lane
// order and added in double across samples; the bias gradient likewise.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/conv_direct_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// Plain headers: compiled once (include guards), outside the per-target namespace.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/conv_direct_simd.h"
#include "kernels/cpu/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
using conv_direct_simd::Geometry;
using conv_direct_simd::kOutBlock;
using conv_direct_simd::PaddedInput;

static_assert(kOutBlock == 8, "the loops below name eight accumulators");

template <class T>
void PadInputT(const T* x, std::int64_t h, std::int64_t w, std::int64_t padding,
               const PaddedInput& p, float* out) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  std::fill(out, out + p.channels * p.rows * p.row, 0.0f);
  for (std::int64_t c = 0; c < p.channels; ++c) {
    for (std::int64_t r = 0; r < h; ++r) {
      const T* src = x + (c * h + r) * w;
      float* dst = out + (c * p.rows + r + padding) * p.row + padding;
      for (std::int64_t j = 0; j < w; j += N) {
        const auto count = static_cast<std::size_t>(std::min(N, w - j));
        // The zero lanes of a partial load land on padding or past the row's end, zero anyway.
        hn::StoreU(LoadF32N(d, src + j, count), d, dst + j);
      }
    }
  }
}

void ConvDirectPadInput(const void* x, int t, std::int64_t h, std::int64_t w,
                        std::int64_t padding, const PaddedInput& p, float* out) {
  WithDType(t, [&](auto tag) {
    PadInputT(static_cast<const Elem<decltype(tag)>*>(x), h, w, padding, p, out);
  });
}

template <class T>
void ForwardT(const PaddedInput& x, const Geometry& g, const float* w, const float* bias, T* y,
              std::int64_t valid) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t taps = x.channels * g.kh * g.kw, plane = g.out_h * g.out_w;
  for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
    for (std::int64_t ox0 = 0; ox0 < g.out_w; ox0 += N) {
      // (Named accumulators, not an array: SVE vectors are sizeless.)
      VF a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
      std::int64_t tap = 0;
      for (std::int64_t c = 0; c < x.channels; ++c) {
        for (std::int64_t ky = 0; ky < g.kh; ++ky) {
          const float* row = x.data + (c * x.rows + oy + ky) * x.row + ox0;
          for (std::int64_t kx = 0; kx < g.kw; ++kx, ++tap) {
            const VF v = hn::LoadU(d, row + kx);
            const float* wt = w + tap;
            a0 = hn::MulAdd(v, hn::Set(d, wt[0 * taps]), a0);
            a1 = hn::MulAdd(v, hn::Set(d, wt[1 * taps]), a1);
            a2 = hn::MulAdd(v, hn::Set(d, wt[2 * taps]), a2);
            a3 = hn::MulAdd(v, hn::Set(d, wt[3 * taps]), a3);
            a4 = hn::MulAdd(v, hn::Set(d, wt[4 * taps]), a4);
            a5 = hn::MulAdd(v, hn::Set(d, wt[5 * taps]), a5);
            a6 = hn::MulAdd(v, hn::Set(d, wt[6 * taps]), a6);
            a7 = hn::MulAdd(v, hn::Set(d, wt[7 * taps]), a7);
          }
        }
      }
      const auto count = static_cast<std::size_t>(std::min(N, g.out_w - ox0));
      T* out = y + oy * g.out_w + ox0;
      const auto store = [&](std::int64_t o, VF sum) {
        if (o < valid) StoreF32N(d, hn::Add(sum, hn::Set(d, bias[o])), out + o * plane, count);
      };
      store(0, a0), store(1, a1), store(2, a2), store(3, a3);
      store(4, a4), store(5, a5), store(6, a6), store(7, a7);
    }
  }
}

// partials row `row` (kRowSlack floats, the first Lanes(d) used) += v.
HWY_INLINE void AddPartial(DF d, float* partials, std::int64_t row, VF v) {
  float* p = partials + row * conv_direct_simd::kRowSlack;
  hn::StoreU(hn::Add(hn::LoadU(d, p), v), d, p);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// Register blocks for the weight gradient on x86 (arrays of vectors, which SVE's sizeless
// vectors do not allow): the portable loop loads one dy vector per FMA; here each dy vector
// serves kGradTaps FMAs and each input vector kGradChannels. Every sum keeps the portable
// loop's terms and order, so both give the same bits. (The forward is bound by storing its
// output, not by loads: a blocked forward measured slower.)
#if HWY_TARGET <= HWY_AVX3
constexpr std::int64_t kGradChannels = 4, kGradTaps = 3;  // 12 sums of 32 registers
#else
constexpr std::int64_t kGradChannels = 4, kGradTaps = 2;  // 8 sums of 16
#endif
static_assert(kOutBlock % kGradChannels == 0);

// Keeps a loaded vector in a register. GCC otherwise folds the load into each FMA that uses it
// (a memory operand per FMA), tripling the loads of this loop; Zen 4 issues one 512-bit load
// per cycle, so that bounded it (bench_conv L1 backward weights, f32: 0.59 -> 0.44 ms).
HWY_INLINE void InRegister(VF& v) { asm volatile("" : "+v"(v.raw)); }

// Adds the lane sums of taps (c, ky, kx0 + j), j < KX, for channels o < valid over one
// sample's output plane (dy widened in scratch as BackwardWeightsT lays it out) into the
// partials of (o, tap0 + j).
template <std::int64_t KX>
void GradTapsBlocked(const PaddedInput& x, const Geometry& g, std::int64_t c, std::int64_t ky,
                     std::int64_t kx0, const float* scratch, std::int64_t pw, std::int64_t valid,
                     std::int64_t tap0, std::int64_t taps, float* partials) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t gplane = g.out_h * pw;
  for (std::int64_t o0 = 0; o0 < valid; o0 += kGradChannels) {
    VF acc[kGradChannels][KX];
    for (auto& row_acc : acc) {
      for (VF& a : row_acc) a = hn::Zero(d);
    }
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      const float* row = x.data + (c * x.rows + oy + ky) * x.row + kx0;
      const float* gr = scratch + o0 * gplane + oy * pw;
      for (std::int64_t ox0 = 0; ox0 < g.out_w; ox0 += N) {
        VF v[KX];
        for (std::int64_t j = 0; j < KX; ++j) v[j] = hn::LoadU(d, row + ox0 + j);
        if (ox0 + N > g.out_w) {  // see BackwardWeightsT: no 0 * Inf past the row
          const auto keep = hn::FirstN(d, static_cast<std::size_t>(g.out_w - ox0));
          for (std::int64_t j = 0; j < KX; ++j) v[j] = hn::IfThenElseZero(keep, v[j]);
        }
        for (std::int64_t j = 0; j < KX; ++j) InRegister(v[j]);
        for (std::int64_t i = 0; i < kGradChannels; ++i) {
          VF gv = hn::LoadU(d, gr + i * gplane + ox0);
          InRegister(gv);
          for (std::int64_t j = 0; j < KX; ++j) acc[i][j] = hn::MulAdd(gv, v[j], acc[i][j]);
        }
      }
    }
    for (std::int64_t i = 0; i < std::min(kGradChannels, valid - o0); ++i) {
      for (std::int64_t j = 0; j < KX; ++j) AddPartial(d, partials, (o0 + i) * (taps + 1) + tap0 + j, acc[i][j]);
    }
  }
}
#endif

void ConvDirectForward(const PaddedInput& x, const Geometry& g, const float* w,
                       const float* bias, void* y, int t, std::int64_t valid) {
  WithDType(t, [&](auto tag) { ForwardT(x, g, w, bias, static_cast<Elem<decltype(tag)>*>(y), valid); });
}

template <class T>
void BackwardWeightsT(const PaddedInput& x, const Geometry& g, const T* dy, std::int64_t valid,
                      float* scratch, float* partials) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t taps = x.channels * g.kh * g.kw, plane = g.out_h * g.out_w;
  const std::int64_t pw = (g.out_w + N - 1) / N * N;
  const std::int64_t gplane = g.out_h * pw;
  // dy widened to f32 rows of pw values, zero past out_w (and whole zero planes past `valid`),
  // with each plane's sum for the bias gradient.
  for (std::int64_t o = 0; o < kOutBlock; ++o) {
    float* gp = scratch + o * gplane;
    if (o >= valid) {
      std::fill(gp, gp + gplane, 0.0f);
      continue;
    }
    VF sum = hn::Zero(d);
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      const T* src = dy + o * plane + oy * g.out_w;
      float* dst = gp + oy * pw;
      std::int64_t ox0 = 0;
      for (; ox0 < g.out_w; ox0 += N) {
        const VF v = LoadF32N(d, src + ox0, static_cast<std::size_t>(std::min(N, g.out_w - ox0)));
        hn::StoreU(v, d, dst + ox0);
        sum = hn::Add(sum, v);
      }
      std::fill(dst + ox0, dst + pw, 0.0f);
    }
    AddPartial(d, partials, o * (taps + 1) + taps, sum);
  }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  for (std::int64_t c = 0; c < x.channels; ++c) {
    for (std::int64_t ky = 0; ky < g.kh; ++ky) {
      for (std::int64_t kx0 = 0; kx0 < g.kw; kx0 += kGradTaps) {
        const std::int64_t tap0 = (c * g.kh + ky) * g.kw + kx0;
        switch (std::min(kGradTaps, g.kw - kx0)) {
          case 1: GradTapsBlocked<1>(x, g, c, ky, kx0, scratch, pw, valid, tap0, taps, partials); break;
          case 2: GradTapsBlocked<2>(x, g, c, ky, kx0, scratch, pw, valid, tap0, taps, partials); break;
          default:
            GradTapsBlocked<kGradTaps>(x, g, c, ky, kx0, scratch, pw, valid, tap0, taps, partials);
        }
      }
    }
  }
#else
  std::int64_t tap = 0;
  for (std::int64_t c = 0; c < x.channels; ++c) {
    for (std::int64_t ky = 0; ky < g.kh; ++ky) {
      for (std::int64_t kx = 0; kx < g.kw; ++kx, ++tap) {
        VF a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
          const float* row = x.data + (c * x.rows + oy + ky) * x.row + kx;
          const float* gr = scratch + oy * pw;
          for (std::int64_t ox0 = 0; ox0 < g.out_w; ox0 += N) {
            VF v = hn::LoadU(d, row + ox0);
            // Past out_w dy is 0, but the input there may be Inf or NaN (0 * Inf = NaN).
            if (ox0 + N > g.out_w) {
              v = hn::IfThenElseZero(hn::FirstN(d, static_cast<std::size_t>(g.out_w - ox0)), v);
            }
            const float* gc = gr + ox0;
            a0 = hn::MulAdd(hn::LoadU(d, gc + 0 * gplane), v, a0);
            a1 = hn::MulAdd(hn::LoadU(d, gc + 1 * gplane), v, a1);
            a2 = hn::MulAdd(hn::LoadU(d, gc + 2 * gplane), v, a2);
            a3 = hn::MulAdd(hn::LoadU(d, gc + 3 * gplane), v, a3);
            a4 = hn::MulAdd(hn::LoadU(d, gc + 4 * gplane), v, a4);
            a5 = hn::MulAdd(hn::LoadU(d, gc + 5 * gplane), v, a5);
            a6 = hn::MulAdd(hn::LoadU(d, gc + 6 * gplane), v, a6);
            a7 = hn::MulAdd(hn::LoadU(d, gc + 7 * gplane), v, a7);
          }
        }
        const auto add = [&](std::int64_t o, VF sum) {
          if (o < valid) AddPartial(d, partials, o * (taps + 1) + tap, sum);
        };
        add(0, a0), add(1, a1), add(2, a2), add(3, a3);
        add(4, a4), add(5, a5), add(6, a6), add(7, a7);
      }
    }
  }
#endif
}

void ConvDirectBackwardWeights(const PaddedInput& x, const Geometry& g, const void* dy, int t,
                               std::int64_t valid, float* scratch, float* partials) {
  WithDType(t, [&](auto tag) {
    BackwardWeightsT(x, g, static_cast<const Elem<decltype(tag)>*>(dy), valid, scratch, partials);
  });
}

void ConvDirectFoldPartials(const float* partials, std::int64_t rows, double* out) {
  const DF d;
  for (std::int64_t r = 0; r < rows; ++r) {
    const VF v = hn::LoadU(d, partials + r * conv_direct_simd::kRowSlack);
    out[r] += static_cast<double>(FoldLanesInOrder(d, v, [](float a, float b) { return a + b; }));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(ConvDirectPadInput);
HWY_EXPORT(ConvDirectForward);
HWY_EXPORT(ConvDirectBackwardWeights);
HWY_EXPORT(ConvDirectFoldPartials);

namespace conv_direct_simd {

void pad_input(const void* x, DType t, std::int64_t h, std::int64_t w, std::int64_t padding,
               const PaddedInput& layout, float* out) {
  HWY_DYNAMIC_DISPATCH(ConvDirectPadInput)(x, static_cast<int>(t), h, w, padding, layout, out);
}

void forward(const PaddedInput& x, const Geometry& g, const float* weights, const float* bias,
             void* y, DType t, std::int64_t valid) {
  HWY_DYNAMIC_DISPATCH(ConvDirectForward)(x, g, weights, bias, y, static_cast<int>(t), valid);
}

void backward_weights(const PaddedInput& x, const Geometry& g, const void* dy, DType t,
                      std::int64_t valid, float* scratch, float* partials) {
  HWY_DYNAMIC_DISPATCH(ConvDirectBackwardWeights)(x, g, dy, static_cast<int>(t), valid, scratch,
                                                  partials);
}

void fold_partials(const float* partials, std::int64_t rows, double* out) {
  HWY_DYNAMIC_DISPATCH(ConvDirectFoldPartials)(partials, rows, out);
}

}  // namespace conv_direct_simd
}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
