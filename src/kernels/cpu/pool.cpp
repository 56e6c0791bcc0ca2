// Dispatching pooling kernels: chunks of planes run in parallel (planes are independent in
// NCHW), each through row-oriented loops that give bit-identical results to the reference:
// every window is visited in the same row-major order with the same f32 operations, only
// reorganised so the inner loop runs across a whole output row without branches (input rows
// are copied into a padded f32 row whose padding can never win a max or change a sum).
// Our own loops rather than oneDNN's pooling: oneDNN's max pooling does not promise NaN
// propagation and has no f16 on CPU.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/pool_avx512.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using cpu::kParallelMinWork;

// Runs body(first_plane, plane_count) over all n * c planes, in parallel when large.
template <class Body>
void over_planes(std::int64_t planes, std::int64_t work_per_plane, Body&& body) {
  const std::int64_t work = planes * std::max<std::int64_t>(work_per_plane, 1);
  if (work < kParallelMinWork || planes < 2) {
    if (planes > 0) body(std::int64_t{0}, planes);
    return;
  }
  // Chunks of ~kParallelMinWork elements, at least one plane each.
  const std::int64_t per_chunk =
      std::max<std::int64_t>(1, kParallelMinWork / std::max<std::int64_t>(work_per_plane, 1));
  const std::int64_t chunks = (planes + per_chunk - 1) / per_chunk;
  cpu::parallel_for(chunks, true, [&](std::int64_t i) {
    const std::int64_t first = i * per_chunk;
    body(first, std::min(per_chunk, planes - first));
  });
}

void log_pool(const char* op, DType t, bool parallel) {
  if (verbose_enabled()) {
    verbose_log(op, name(t), parallel ? "row loops (openmp over planes)" : "row loops (one thread)");
  }
}

// Valid input range [begin, end) of the window of output position `out` along one axis.
struct Span {
  std::int64_t begin, end;
};
Span window(std::int64_t out, const Pool2dDesc& d, std::int64_t extent) {
  const std::int64_t start = out * d.stride - d.padding;
  return {std::max<std::int64_t>(start, 0), std::min(start + d.kernel, extent)};
}

// Input row iy widened to f32 at row[padding ...]; the padding columns keep their fill value.
template <class T>
void load_row(const T* x, const Pool2dDesc& d, std::int64_t iy, float* row) {
  const T* src = x + iy * d.w;
  for (std::int64_t i = 0; i < d.w; ++i) row[d.padding + i] = static_cast<float>(src[i]);
}

struct RowScratch {
  std::vector<float> row, acc;
  std::vector<std::int32_t> idx;
  void size(const Pool2dDesc& d, float fill) {
    row.assign(static_cast<std::size_t>(d.w + 2 * d.padding + d.stride + d.kernel), fill);
    acc.resize(static_cast<std::size_t>(d.out_w()));
    idx.resize(static_cast<std::size_t>(d.out_w()));
  }
};

// Max pooling of `planes` planes: same visiting order and update rule as ref::max_pool2d
// (strictly greater, or NaN while the best is not NaN), so the same winner.
template <class T>
void max_planes(const Pool2dDesc& d, const T* x, T* y, std::int32_t* argmax, std::int64_t planes) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), s = d.stride, p = d.padding;
  RowScratch r;
  r.size(d, -INFINITY);  // padding can never be strictly greater than a real element
  float* best = r.acc.data();
  std::int32_t* idx = r.idx.data();
  for (std::int64_t q = 0; q < planes; ++q, x += d.h * d.w, y += ho * wo) {
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const Span ry = window(oy, d, d.h);
      for (std::int64_t ox = 0; ox < wo; ++ox) {  // start from the first real element
        const auto i = static_cast<std::int32_t>(ry.begin * d.w + window(ox, d, d.w).begin);
        best[ox] = static_cast<float>(x[i]);
        idx[ox] = i;
      }
      for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
        load_row(x, d, iy, r.row.data());
        for (std::int64_t kx = 0; kx < d.kernel; ++kx) {
          const float* src = r.row.data() + kx;
          const auto base = static_cast<std::int32_t>(iy * d.w + kx - p);
          for (std::int64_t ox = 0; ox < wo; ++ox) {
            const float v = src[ox * s], b = best[ox];
            const bool take = (b == b) & ((v > b) | (v != v));
            best[ox] = take ? v : b;
            idx[ox] = take ? base + static_cast<std::int32_t>(ox * s) : idx[ox];
          }
        }
      }
      for (std::int64_t ox = 0; ox < wo; ++ox) {
        y[oy * wo + ox] = x[idx[ox]];  // the input's own bits (NaN payloads included)
        if (argmax != nullptr) argmax[(q * ho + oy) * wo + ox] = idx[ox];
      }
    }
  }
}

// Windows that neither overlap nor touch padding (stride >= kernel, padding 0: the CNN's 2x2
// stride-2 pooling) need no row staging: each output reads its k x k elements directly, in the
// reference's row-major order with its update rule, so the winner is the same.
bool disjoint_windows(const Pool2dDesc& d) { return d.padding == 0 && d.stride >= d.kernel; }

template <class T>
void max_planes_disjoint(const Pool2dDesc& d, const T* x, T* y, std::int32_t* argmax,
                         std::int64_t planes) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), s = d.stride, k = d.kernel;
  if (k == 2 && s == 2 && cpu::avx512_unavailable_reason().empty()) {
    // The CNN's case: 16 windows per step in AVX-512, then the winners' own bits are copied.
    std::vector<std::int32_t> idx(static_cast<std::size_t>(wo));
    for (std::int64_t q = 0; q < planes; ++q, x += d.h * d.w, y += ho * wo) {
      for (std::int64_t oy = 0; oy < ho; ++oy) {
        const T* row0 = x + 2 * oy * d.w;
        avx512::max_pool2x2_row(row0, row0 + d.w, static_cast<int>(d.dtype), d.w,
                                static_cast<std::int32_t>(2 * oy * d.w), idx.data());
        for (std::int64_t ox = 0; ox < wo; ++ox) {
          y[oy * wo + ox] = x[idx[static_cast<std::size_t>(ox)]];
          if (argmax != nullptr) argmax[(q * ho + oy) * wo + ox] = idx[static_cast<std::size_t>(ox)];
        }
      }
    }
    return;
  }
  for (std::int64_t q = 0; q < planes; ++q, x += d.h * d.w, y += ho * wo) {
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      for (std::int64_t ox = 0; ox < wo; ++ox) {
        auto best_i = static_cast<std::int32_t>(oy * s * d.w + ox * s);
        float best = static_cast<float>(x[best_i]);
        for (std::int64_t ky = 0; ky < k; ++ky) {
          for (std::int64_t kx = 0; kx < k; ++kx) {
            const auto i = static_cast<std::int32_t>((oy * s + ky) * d.w + ox * s + kx);
            const float v = static_cast<float>(x[i]);
            if (best == best && (v > best || v != v)) best = v, best_i = i;
          }
        }
        y[oy * wo + ox] = x[best_i];  // the input's own bits (NaN payloads included)
        if (argmax != nullptr) argmax[(q * ho + oy) * wo + ox] = best_i;
      }
    }
  }
}

// Backward of disjoint windows: every input element gets at most one gradient, so dx is zero
// except at the argmaxes. The value is the reference's f32 sum 0 + dy (which turns -0 into +0).
template <class T>
void max_backward_planes_disjoint(const Pool2dDesc& d, const T* dy, const std::int32_t* argmax,
                                  T* dx, std::int64_t planes) {
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  std::fill(dx, dx + planes * in_plane, T(0.0f));
  for (std::int64_t q = 0; q < planes; ++q, dy += out_plane, argmax += out_plane, dx += in_plane) {
    for (std::int64_t i = 0; i < out_plane; ++i) dx[argmax[i]] = T(0.0f + static_cast<float>(dy[i]));
  }
}

// Average pooling: each sum adds the window's real elements in row-major order like the
// reference; the zero padding columns add +0.0, which cannot change an f32 sum that started at
// +0.0 (it is never -0.0), so the bits match.
template <class T>
void avg_planes(const Pool2dDesc& d, const T* x, T* y, std::int64_t planes) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), s = d.stride;
  RowScratch r;
  r.size(d, 0.0f);
  float* acc = r.acc.data();
  for (std::int64_t q = 0; q < planes; ++q, x += d.h * d.w, y += ho * wo) {
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const Span ry = window(oy, d, d.h);
      std::fill(r.acc.begin(), r.acc.end(), 0.0f);
      for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
        load_row(x, d, iy, r.row.data());
        for (std::int64_t kx = 0; kx < d.kernel; ++kx) {
          const float* src = r.row.data() + kx;
          for (std::int64_t ox = 0; ox < wo; ++ox) acc[ox] += src[ox * s];
        }
      }
      for (std::int64_t ox = 0; ox < wo; ++ox) {
        const Span rx = window(ox, d, d.w);
        const auto count = static_cast<float>((ry.end - ry.begin) * (rx.end - rx.begin));
        y[oy * wo + ox] = T(acc[ox] / count);
      }
    }
  }
}

// Average pooling backward into an f32 plane with padded columns. For each input element the
// contributions arrive window by window in row-major order, as in the reference: oy ascends in
// the outer loop and, within a row, kx descends so that ox ascends for a fixed input column.
template <class T>
void avg_backward_planes(const Pool2dDesc& d, const T* dy, T* dx, std::int64_t planes) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), s = d.stride, p = d.padding;
  const std::int64_t pw = d.w + 2 * p + s + d.kernel;  // padded row pitch
  std::vector<float> acc(static_cast<std::size_t>(d.h * pw)), g(static_cast<std::size_t>(wo));
  for (std::int64_t q = 0; q < planes; ++q, dy += ho * wo, dx += d.h * d.w) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const Span ry = window(oy, d, d.h);
      for (std::int64_t ox = 0; ox < wo; ++ox) {
        const Span rx = window(ox, d, d.w);
        const auto count = static_cast<float>((ry.end - ry.begin) * (rx.end - rx.begin));
        g[static_cast<std::size_t>(ox)] = static_cast<float>(dy[oy * wo + ox]) / count;
      }
      for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
        float* row = acc.data() + iy * pw;
        for (std::int64_t kx = d.kernel - 1; kx >= 0; --kx) {
          for (std::int64_t ox = 0; ox < wo; ++ox) row[ox * s + kx] += g[static_cast<std::size_t>(ox)];
        }
      }
    }
    for (std::int64_t iy = 0; iy < d.h; ++iy) {
      for (std::int64_t ix = 0; ix < d.w; ++ix) {
        dx[iy * d.w + ix] = T(acc[static_cast<std::size_t>(iy * pw + p + ix)]);
      }
    }
  }
}

}  // namespace

namespace cpu {
void max_pool2d(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax) {
  validate_pool2d("max_pool2d", d);
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    dispatch(d.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* xp = static_cast<const T*>(x) + p * in_plane;
      T* yp = static_cast<T*>(y) + p * out_plane;
      std::int32_t* ap = argmax == nullptr ? nullptr : argmax + p * out_plane;
      if (disjoint_windows(d)) {
        max_planes_disjoint(d, xp, yp, ap, count);
      } else {
        max_planes(d, xp, yp, ap, count);
      }
    });
  });
  log_pool("max_pool2d", d.dtype, d.n * d.c * in_plane >= kParallelMinWork);
}

void max_pool2d_backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                         void* dx) {
  validate_pool2d("max_pool2d_backward", d);
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    if (disjoint_windows(d)) {
      dispatch(d.dtype, [&](auto tag) {
        using T = decltype(tag);
        max_backward_planes_disjoint(d, static_cast<const T*>(dy) + p * out_plane,
                                     argmax + p * out_plane, static_cast<T*>(dx) + p * in_plane,
                                     count);
      });
      return;
    }
    Pool2dDesc sub = d;  // overlapping windows sum their gradients like the reference
    sub.n = 1, sub.c = count;
    ref::max_pool2d_backward(sub, cpu::at(dy, d.dtype, p * out_plane),
                             argmax + p * out_plane, cpu::at(dx, d.dtype, p * in_plane));
  });
  log_pool("max_pool2d_backward", d.dtype, d.n * d.c * in_plane >= kParallelMinWork);
}

void avg_pool2d(const Pool2dDesc& d, const void* x, void* y) {
  validate_pool2d("avg_pool2d", d);
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    dispatch(d.dtype, [&](auto tag) {
      using T = decltype(tag);
      avg_planes(d, static_cast<const T*>(x) + p * in_plane, static_cast<T*>(y) + p * out_plane,
                 count);
    });
  });
  log_pool("avg_pool2d", d.dtype, d.n * d.c * in_plane >= kParallelMinWork);
}

void avg_pool2d_backward(const Pool2dDesc& d, const void* dy, void* dx) {
  validate_pool2d("avg_pool2d_backward", d);
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    dispatch(d.dtype, [&](auto tag) {
      using T = decltype(tag);
      avg_backward_planes(d, static_cast<const T*>(dy) + p * out_plane,
                          static_cast<T*>(dx) + p * in_plane, count);
    });
  });
  log_pool("avg_pool2d_backward", d.dtype, d.n * d.c * in_plane >= kParallelMinWork);
}

void global_avg_pool2d(const void* x, DType dtype, std::int64_t planes, std::int64_t hw,
                       void* y) {
  MIXPREC_CHECK(planes >= 0 && hw >= 0, ShapeError, "global_avg_pool2d",
                "negative extent (" << planes << " planes of " << hw << " elements)");
  require_compute_dtype("global_avg_pool2d", dtype);  // the plane loops dispatch in parallel
  over_planes(planes, hw, [&](std::int64_t p, std::int64_t count) {
    ref::global_avg_pool2d(cpu::at(x, dtype, p * hw), dtype, count, hw, cpu::at(y, dtype, p));
  });
  log_pool("global_avg_pool2d", dtype, planes * hw >= kParallelMinWork);
}

void global_avg_pool2d_backward(const void* dy, DType dtype, std::int64_t planes,
                                std::int64_t hw, void* dx) {
  MIXPREC_CHECK(planes >= 0 && hw >= 0, ShapeError, "global_avg_pool2d_backward",
                "negative extent (" << planes << " planes of " << hw << " elements)");
  require_compute_dtype("global_avg_pool2d_backward", dtype);  // the plane loops dispatch in parallel
  over_planes(planes, hw, [&](std::int64_t p, std::int64_t count) {
    ref::global_avg_pool2d_backward(cpu::at(dy, dtype, p), dtype, count, hw,
                                    cpu::at(dx, dtype, p * hw));
  });
  log_pool("global_avg_pool2d_backward", dtype, planes * hw >= kParallelMinWork);
}
}  // namespace cpu

}  // namespace mixprec::kernels
