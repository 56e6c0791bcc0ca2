// Max and average pooling on channels-last (NHWC) activations: a pixel's C values are
// contiguous, so each window step is one pass along a channel row. Max pooling and its
// backward over disjoint windows (the CNNs' 2x2/2) run pool_simd.cpp's Highway loops, lanes
// across channels; the rest are loops the compiler vectorises. Every value is the
// reference's: windows visited in the same row-major order (kernels/spec/pool_math.h's window,
// NaN rule and f32 sums); backward passes in gather form (as the CUDA kernels), where each
// input element adds the windows covering it in the order the reference's scatter does, except
// max pooling over disjoint windows, which writes each window's pixels once from its argmax.
// Rows of output (or input) pixels run in parallel, each written by one task.
#include "kernels/cpu/pool_channels_last.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/pool_simd.h"
#include "kernels/spec/pool_math.h"

namespace mixprec::kernels::cpu {
namespace {

using pool::Span;

// Runs body(n, row) for every (sample, row) of `rows` rows per sample, in parallel when the
// work is large (each row written by one task, so results never depend on the thread count).
template <class Body>
void over_rows(std::int64_t samples, std::int64_t rows, std::int64_t work_per_row, Body&& body) {
  const std::int64_t count = samples * rows;
  const bool parallel = count * std::max<std::int64_t>(work_per_row, 1) >= kParallelMinWork;
  parallel_for(count, parallel, [&](std::int64_t i) { body(i / rows, i % rows); });
}

// Per-thread f32 rows of C values (grow only).
std::vector<float>& scratch_row(std::int64_t c) {
  thread_local std::vector<float> row;
  if (row.size() < static_cast<std::size_t>(c)) row.resize(static_cast<std::size_t>(c));
  return row;
}

// A pixel's c channel values as f32: the pixel itself for f32, else widened into `buffer`.
template <class T>
const float* channel_row(const T* pixel, std::int64_t c, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return pixel;
  } else {
    for (std::int64_t j = 0; j < c; ++j) buffer[j] = static_cast<float>(pixel[j]);
    return buffer;
  }
}

}  // namespace

void max_pool2d_channels_last(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), c = d.c;
  over_rows(d.n, ho, wo * c * d.kernel * d.kernel, [&](std::int64_t n, std::int64_t oy) {
    const std::int64_t out = (n * ho + oy) * wo * c;
    pool_simd::max_pool_channels_last_row(d, at(x, d.dtype, n * d.h * d.w * c), oy,
                                          at(y, d.dtype, out),
                                          argmax != nullptr ? argmax + out : nullptr);
  });
}

void max_pool2d_backward_channels_last(const Pool2dDesc& d, const void* dy_raw,
                                       const std::int32_t* argmax, void* dx_raw) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), c = d.c;
  if (d.padding == 0 && d.stride >= d.kernel) {
    // Disjoint windows: one vector pass writes every pixel of every window (the gradient at its
    // argmax, +0 elsewhere), so only pixels outside all windows need a fill first, and only
    // when the windows do not tile the image.
    const std::int64_t sample = d.h * d.w * c;
    const bool tiles = d.stride == d.kernel && d.h % d.kernel == 0 && d.w % d.kernel == 0;
    if (!tiles) {
      over_rows(d.n, 1, sample, [&](std::int64_t n, std::int64_t) {
        std::memset(at(dx_raw, d.dtype, n * sample), 0,
                    static_cast<std::size_t>(sample) * size_of(d.dtype));
      });
    }
    over_rows(d.n, ho, wo * c * d.kernel * d.kernel, [&](std::int64_t n, std::int64_t oy) {
      const std::int64_t out = (n * ho + oy) * wo * c;
      pool_simd::max_pool_backward_channels_last_row(d, at(dy_raw, d.dtype, out), argmax + out,
                                                     oy, at(dx_raw, d.dtype, n * sample));
    });
    return;
  }
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(dy_raw);
    T* dx = static_cast<T*>(dx_raw);
    over_rows(d.n, d.h, d.w * c, [&](std::int64_t n, std::int64_t iy) {
      float* acc = scratch_row(2 * c).data();
      float* widened = acc + c;
      const Span cy = pool::covering(iy, d, ho);
      for (std::int64_t ix = 0; ix < d.w; ++ix) {
        const auto in = static_cast<std::int32_t>(iy * d.w + ix);
        const Span cx = pool::covering(ix, d, wo);
        std::fill(acc, acc + c, 0.0f);
        for (std::int64_t oy = cy.begin; oy < cy.end; ++oy) {
          for (std::int64_t ox = cx.begin; ox < cx.end; ++ox) {
            const std::int64_t o = ((n * ho + oy) * wo + ox) * c;
            const float* g = channel_row(dy + o, c, widened);
            // The windows covering this input add in the reference's order. Where two of them
            // add NaNs, which NaN's sign and payload survive depends on the order the compiler
            // gives the operands (the value is NaN either way), as in the reference.
            for (std::int64_t j = 0; j < c; ++j) {
              if (argmax[o + j] == in) acc[j] += g[j];
            }
          }
        }
        T* out = dx + ((n * d.h + iy) * d.w + ix) * c;
        for (std::int64_t j = 0; j < c; ++j) out[j] = T(acc[j]);
      }
    });
  });
}

void avg_pool2d_channels_last(const Pool2dDesc& d, const void* x_raw, void* y_raw) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), c = d.c;
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(x_raw);
    T* y = static_cast<T*>(y_raw);
    over_rows(d.n, ho, wo * c * d.kernel * d.kernel, [&](std::int64_t n, std::int64_t oy) {
      float* sum = scratch_row(2 * c).data();
      float* widened = sum + c;
      const T* sample = x + n * d.h * d.w * c;
      const Span ry = pool::window(oy, d, d.h);
      for (std::int64_t ox = 0; ox < wo; ++ox) {
        const Span rx = pool::window(ox, d, d.w);
        std::fill(sum, sum + c, 0.0f);
        for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
          for (std::int64_t ix = rx.begin; ix < rx.end; ++ix) {
            const float* v = channel_row(sample + (iy * d.w + ix) * c, c, widened);
            for (std::int64_t j = 0; j < c; ++j) sum[j] += v[j];
          }
        }
        const float count = pool::window_count(ry, rx);
        T* out = y + ((n * ho + oy) * wo + ox) * c;
        for (std::int64_t j = 0; j < c; ++j) out[j] = T(sum[j] / count);
      }
    });
  });
}

void avg_pool2d_backward_channels_last(const Pool2dDesc& d, const void* dy_raw, void* dx_raw) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), c = d.c;
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(dy_raw);
    T* dx = static_cast<T*>(dx_raw);
    over_rows(d.n, d.h, d.w * c, [&](std::int64_t n, std::int64_t iy) {
      float* acc = scratch_row(2 * c).data();
      float* widened = acc + c;
      const Span cy = pool::covering(iy, d, ho);
      for (std::int64_t ix = 0; ix < d.w; ++ix) {
        const Span cx = pool::covering(ix, d, wo);
        std::fill(acc, acc + c, 0.0f);
        for (std::int64_t oy = cy.begin; oy < cy.end; ++oy) {
          const Span ry = pool::window(oy, d, d.h);
          for (std::int64_t ox = cx.begin; ox < cx.end; ++ox) {
            const float count = pool::window_count(ry, pool::window(ox, d, d.w));
            const float* g = channel_row(dy + ((n * ho + oy) * wo + ox) * c, c, widened);
            for (std::int64_t j = 0; j < c; ++j) acc[j] += g[j] / count;
          }
        }
        T* out = dx + ((n * d.h + iy) * d.w + ix) * c;
        for (std::int64_t j = 0; j < c; ++j) out[j] = T(acc[j]);
      }
    });
  });
}

}  // namespace mixprec::kernels::cpu
