// Reference max / average / global-average pooling, forward and backward: plain loops over
// planes (NCHW or channels-last, through plane_layout()), sums in f32, one rounding per output; the per-window math is kernels/spec/pool_math.h's
// (shared with the CUDA kernels). The spec; kernels:: runs these same loops over
// chunks of planes in parallel (pool.cpp), so results do not depend on the thread count.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/conv.h"
#include "kernels/spec/plane_layout.h"
#include "kernels/spec/pool_math.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

void validate_pool2d(const char* op, const Pool2dDesc& d) {
  require_compute_dtype(op, d.dtype);  // before any parallel region dispatches on it
  MIXPREC_CHECK(d.n >= 0 && d.c >= 0 && d.h >= 0 && d.w >= 0, ShapeError, op,
                "negative extent: input [" << d.n << ", " << d.c << ", " << d.h << ", " << d.w
                                           << "]");
  MIXPREC_CHECK(d.kernel >= 1, ValueError, op, "kernel must be >= 1, got " << d.kernel);
  MIXPREC_CHECK(d.stride >= 1, ValueError, op, "stride must be >= 1, got " << d.stride);
  MIXPREC_CHECK(d.padding >= 0 && 2 * d.padding <= d.kernel, ValueError, op,
                "padding must be in [0, kernel / 2] = [0, " << d.kernel / 2 << "], got "
                                                            << d.padding);
  MIXPREC_CHECK(d.h + 2 * d.padding >= d.kernel && d.w + 2 * d.padding >= d.kernel, ShapeError,
                op, "kernel " << d.kernel << "x" << d.kernel << " is larger than the padded input "
                              << d.h + 2 * d.padding << "x" << d.w + 2 * d.padding
                              << "; use a smaller kernel or more padding");
  MIXPREC_CHECK(d.h * d.w <= std::numeric_limits<std::int32_t>::max(), ShapeError, op,
                "a plane of " << d.h << "x" << d.w << " is too large (argmax indices are 32-bit)");
}

namespace ref {
namespace {

using pool::Span;

// Calls fn(in, out) with the layouts of the input and output planes of every (sample, channel).
template <class Fn>
void for_each_plane(const Pool2dDesc& d, Fn&& fn) {
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t c = 0; c < d.c; ++c) {
      fn(plane_layout(d.channels_last, n, c, d.c, in_plane),
         plane_layout(d.channels_last, n, c, d.c, out_plane));
    }
  }
}

template <class Fn>
void for_each_window(const Pool2dDesc& d, Fn&& fn) {
  const std::int64_t ho = d.out_h(), wo = d.out_w();
  for (std::int64_t oy = 0; oy < ho; ++oy) {
    const Span ry = pool::window(oy, d, d.h);
    for (std::int64_t ox = 0; ox < wo; ++ox) fn(oy * wo + ox, ry, pool::window(ox, d, d.w));
  }
}

}  // namespace

void max_pool2d(const Pool2dDesc& d, const void* x_raw, void* y_raw, std::int32_t* argmax) {
  validate_pool2d("max_pool2d", d);
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(x_raw);
    T* y = static_cast<T*>(y_raw);
    for_each_plane(d, [&](PlaneLayout in, PlaneLayout out_plane) {
      const auto at = [&](std::int64_t i) { return static_cast<float>(x[in.at(i)]); };
      for_each_window(d, [&](std::int64_t out, Span ry, Span rx) {
        const std::int64_t best_i = pool::window_argmax(ry, rx, d.w, at);
        y[out_plane.at(out)] = x[in.at(best_i)];
        if (argmax != nullptr) argmax[out_plane.at(out)] = static_cast<std::int32_t>(best_i);
      });
    });
  });
}

void max_pool2d_backward(const Pool2dDesc& d, const void* dy_raw, const std::int32_t* argmax,
                         void* dx_raw) {
  validate_pool2d("max_pool2d_backward", d);
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  std::vector<float> acc(static_cast<std::size_t>(in_plane));
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(dy_raw);
    T* dx = static_cast<T*>(dx_raw);
    for_each_plane(d, [&](PlaneLayout in, PlaneLayout out) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t i = 0; i < out_plane; ++i) {
        acc[static_cast<std::size_t>(argmax[out.at(i)])] += static_cast<float>(dy[out.at(i)]);
      }
      for (std::int64_t i = 0; i < in_plane; ++i) dx[in.at(i)] = T(acc[static_cast<std::size_t>(i)]);
    });
  });
}

void avg_pool2d(const Pool2dDesc& d, const void* x_raw, void* y_raw) {
  validate_pool2d("avg_pool2d", d);
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(x_raw);
    T* y = static_cast<T*>(y_raw);
    for_each_plane(d, [&](PlaneLayout in, PlaneLayout out_plane) {
      const auto at = [&](std::int64_t i) { return static_cast<float>(x[in.at(i)]); };
      for_each_window(d, [&](std::int64_t out, Span ry, Span rx) {
        y[out_plane.at(out)] = T(pool::window_mean(ry, rx, d.w, at));
      });
    });
  });
}

void avg_pool2d_backward(const Pool2dDesc& d, const void* dy_raw, void* dx_raw) {
  validate_pool2d("avg_pool2d_backward", d);
  const std::int64_t in_plane = d.h * d.w;
  std::vector<float> acc(static_cast<std::size_t>(in_plane));
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(dy_raw);
    T* dx = static_cast<T*>(dx_raw);
    for_each_plane(d, [&](PlaneLayout in, PlaneLayout out_plane) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for_each_window(d, [&](std::int64_t out, Span ry, Span rx) {
        const float g = static_cast<float>(dy[out_plane.at(out)]) / pool::window_count(ry, rx);
        for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
          for (std::int64_t ix = rx.begin; ix < rx.end; ++ix) {
            acc[static_cast<std::size_t>(iy * d.w + ix)] += g;
          }
        }
      });
      for (std::int64_t i = 0; i < in_plane; ++i) dx[in.at(i)] = T(acc[static_cast<std::size_t>(i)]);
    });
  });
}

void global_avg_pool2d(const void* x_raw, DType dtype, std::int64_t planes, std::int64_t hw,
                       void* y_raw) {
  MIXPREC_CHECK(planes >= 0 && hw >= 0, ShapeError, "global_avg_pool2d",
                "negative extent (" << planes << " planes of " << hw << " elements)");
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t p = 0; p < planes; ++p) {
      const T* x = static_cast<const T*>(x_raw) + p * hw;
      float sum = 0.0f;
      for (std::int64_t i = 0; i < hw; ++i) sum += static_cast<float>(x[i]);
      static_cast<T*>(y_raw)[p] = T(sum / static_cast<float>(hw));  // 0/0 = NaN for empty planes
    }
  });
}

void global_avg_pool2d_backward(const void* dy_raw, DType dtype, std::int64_t planes,
                                std::int64_t hw, void* dx_raw) {
  MIXPREC_CHECK(planes >= 0 && hw >= 0, ShapeError, "global_avg_pool2d_backward",
                "negative extent (" << planes << " planes of " << hw << " elements)");
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t p = 0; p < planes; ++p) {
      const T g = T(static_cast<float>(static_cast<const T*>(dy_raw)[p]) / static_cast<float>(hw));
      T* dx = static_cast<T*>(dx_raw) + p * hw;
      for (std::int64_t i = 0; i < hw; ++i) dx[i] = g;
    }
  });
}

}  // namespace ref
}  // namespace mixprec::kernels
