// Dispatching pooling kernels (channels-last calls go to pool_channels_last.cpp): chunks of
// planes run in parallel (planes are independent in
// NCHW; fixed chunks, so results never depend on the thread count), each through the Highway
// loops of pool_simd.cpp, which give the reference's bits (same visiting and summation order).
// Our own loops rather than oneDNN's pooling: oneDNN's max pooling does not promise NaN
// propagation and has no f16 on CPU.
//
// Max-pooling backward is a scatter: with disjoint windows (2x2/2, the CNNs' case) a zero fill
// plus one store per output, with overlapping ones the reference's f32 accumulation, run over
// plane chunks in parallel (both logged with the reason). The fill and the scatter run at about
// the copy bandwidth; a vector pass comparing every input element with its window's argmax
// (removed) was 5x slower on AVX-512 (bench_conv, max_bwd at the CNN's first pool). Global
// average pooling's backward broadcasts one value per plane.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/conv.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/pool_channels_last.h"
#include "kernels/cpu/pool_simd.h"
#include "kernels/cpu/zero_plus.h"
#include "mixprec/core/half.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using cpu::kParallelMinWork;

// Runs body(first_plane, plane_count) over all planes, in parallel when large: chunks of about
// kParallelMinWork elements, at least one plane each.
template <class Body>
void over_planes(std::int64_t planes, std::int64_t work_per_plane, Body&& body) {
  const std::int64_t per_plane = std::max<std::int64_t>(work_per_plane, 1);
  if (planes * per_plane < kParallelMinWork || planes < 2) {
    if (planes > 0) body(std::int64_t{0}, planes);
    return;
  }
  const std::int64_t per_chunk = std::max<std::int64_t>(1, kParallelMinWork / per_plane);
  const std::int64_t chunks = (planes + per_chunk - 1) / per_chunk;
  cpu::parallel_for(chunks, true, [&](std::int64_t i) {
    const std::int64_t first = i * per_chunk;
    body(first, std::min(per_chunk, planes - first));
  });
}

// Windows that neither overlap nor touch padding: each input element is in at most one window.
bool disjoint_windows(const Pool2dDesc& d) { return d.padding == 0 && d.stride >= d.kernel; }

// Backward of disjoint windows: dx is zero except at the argmaxes, where it is zero_plus(dy).
// The fill is a memset: +0 is all-zero bits in every dtype.
template <class T>
void max_backward_planes_disjoint(const Pool2dDesc& d, const T* dy, const std::int32_t* argmax,
                                  T* dx, std::int64_t planes) {
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  std::memset(static_cast<void*>(dx), 0, static_cast<std::size_t>(planes * in_plane) * sizeof(T));
  for (std::int64_t q = 0; q < planes; ++q, dy += out_plane, argmax += out_plane, dx += in_plane) {
    for (std::int64_t i = 0; i < out_plane; ++i) dx[argmax[i]] = cpu::zero_plus(dy[i]);
  }
}

void log_channels_last(const char* op, const Pool2dDesc& d) {
  if (verbose_enabled()) verbose_log(op, name(d.dtype), "cpu channels-last rows");
}

void check_global(const char* op, DType dtype, std::int64_t planes, std::int64_t hw) {
  MIXPREC_CHECK(planes >= 0 && hw >= 0, ShapeError, op,
                "negative extent (" << planes << " planes of " << hw << " elements)");
  require_compute_dtype(op, dtype);  // on the calling thread, before any parallel region
}

}  // namespace

namespace cpu {
void max_pool2d(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax) {
  validate_pool2d("max_pool2d", d);
  if (d.channels_last) {
    log_channels_last("max_pool2d", d);
    return max_pool2d_channels_last(d, x, y, argmax);
  }
  log_simd("max_pool2d", name(d.dtype));
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  const bool two_by_two = d.kernel == 2 && d.stride == 2 && d.padding == 0;
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    const void* xp = at(x, d.dtype, p * in_plane);
    void* yp = at(y, d.dtype, p * out_plane);
    std::int32_t* ap = argmax == nullptr ? nullptr : argmax + p * out_plane;
    if (two_by_two) {
      pool_simd::max_pool_2x2(d, xp, yp, ap, count);
    } else {
      pool_simd::max_pool_rows(d, xp, yp, ap, count);
    }
  });
}

void max_pool2d_backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                         void* dx) {
  validate_pool2d("max_pool2d_backward", d);
  if (d.channels_last) {
    log_channels_last("max_pool2d_backward", d);
    return max_pool2d_backward_channels_last(d, dy, argmax, dx);
  }
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  if (disjoint_windows(d)) {
    // Not the reference's loop and not a vector loop: the scatter moves only the bytes the
    // gradient needs, which a vector pass over every input element cannot beat.
    if (verbose_enabled()) {
      verbose_log("max_pool2d_backward", name(d.dtype), "cpu scatter",
                  "disjoint windows: a zero fill plus one store per output, planes in parallel");
    }
    over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
      dispatch(d.dtype, [&](auto tag) {
        using T = decltype(tag);
        max_backward_planes_disjoint(d, static_cast<const T*>(dy) + p * out_plane,
                                     argmax + p * out_plane, static_cast<T*>(dx) + p * in_plane,
                                     count);
      });
    });
    return;
  }
  log_reference("max_pool2d_backward", name(d.dtype),
                "overlapping windows: gradients scatter-add to argmaxes in the reference's order "
                "(planes in parallel)");
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    Pool2dDesc sub = d;  // a chunk of planes is a smaller batch of the same planes
    sub.n = 1, sub.c = count;
    ref::max_pool2d_backward(sub, at(dy, d.dtype, p * out_plane), argmax + p * out_plane,
                             at(dx, d.dtype, p * in_plane));
  });
}

void avg_pool2d(const Pool2dDesc& d, const void* x, void* y) {
  validate_pool2d("avg_pool2d", d);
  if (d.channels_last) {
    log_channels_last("avg_pool2d", d);
    return avg_pool2d_channels_last(d, x, y);
  }
  log_simd("avg_pool2d", name(d.dtype));
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    pool_simd::avg_pool_rows(d, at(x, d.dtype, p * in_plane), at(y, d.dtype, p * out_plane), count);
  });
}

void avg_pool2d_backward(const Pool2dDesc& d, const void* dy, void* dx) {
  validate_pool2d("avg_pool2d_backward", d);
  if (d.channels_last) {
    log_channels_last("avg_pool2d_backward", d);
    return avg_pool2d_backward_channels_last(d, dy, dx);
  }
  log_simd("avg_pool2d_backward", name(d.dtype));
  const std::int64_t in_plane = d.h * d.w, out_plane = d.out_h() * d.out_w();
  over_planes(d.n * d.c, in_plane, [&](std::int64_t p, std::int64_t count) {
    pool_simd::avg_pool_backward_rows(d, at(dy, d.dtype, p * out_plane),
                                      at(dx, d.dtype, p * in_plane), count);
  });
}

void global_avg_pool2d(const void* x, DType dtype, std::int64_t planes, std::int64_t hw,
                       void* y) {
  check_global("global_avg_pool2d", dtype, planes, hw);
  log_simd("global_avg_pool2d", name(dtype));
  over_planes(planes, hw, [&](std::int64_t p, std::int64_t count) {
    pool_simd::plane_means(at(x, dtype, p * hw), dtype, count, hw, at(y, dtype, p));
  });
}

void global_avg_pool2d_backward(const void* dy, DType dtype, std::int64_t planes,
                                std::int64_t hw, void* dx) {
  check_global("global_avg_pool2d_backward", dtype, planes, hw);
  if (verbose_enabled()) verbose_log("global_avg_pool2d_backward", name(dtype), "broadcast fill");
  over_planes(planes, hw, [&](std::int64_t p, std::int64_t count) {
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      for (std::int64_t q = p; q < p + count; ++q) {
        // The reference's value: dy / hw in f32, rounded once.
        const T g = T(static_cast<float>(static_cast<const T*>(dy)[q]) / static_cast<float>(hw));
        T* out = static_cast<T*>(dx) + q * hw;
        std::fill(out, out + hw, g);
      }
    });
  });
}
}  // namespace cpu

}  // namespace mixprec::kernels
