// The CUDA pooling kernels, NCHW or channels-last (kernels/spec/plane_layout.h: thread i takes the
// element at memory position i, so neighbouring threads touch neighbouring addresses in both
// layouts). Forwards: one thread per output element running the reference's
// per-window math (kernels/spec/pool_math.h: the window, the first maximum with its NaN rule, the
// mean), so maxima, argmax and means are the reference's bits. Backwards in gather form, no
// atomics: one thread per input element visits the windows covering it in row-major order,
// the order in which the reference's scatter loop adds their contributions, so the f32 sums
// are the reference's too. Global average pooling: one warp per plane, a fixed-order sum.
#include <algorithm>
#include <cstdint>

#include "kernels/conv.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/spec/plane_layout.h"
#include "kernels/spec/pool_math.h"

namespace mixprec::kernels::cuda {
namespace {

// The maximum is stored as the input's raw element, as the reference copies x[best] (a NaN
// keeps its payload).
__device__ inline void copy_element(const void* src, std::int64_t si, void* dst, std::int64_t di,
                                    DType t) {
  if (t == DType::f32) {
    static_cast<std::uint32_t*>(dst)[di] = static_cast<const std::uint32_t*>(src)[si];
  } else {
    static_cast<std::uint16_t*>(dst)[di] = static_cast<const std::uint16_t*>(src)[si];
  }
}

__global__ void max_pool_kernel(Pool2dDesc d, std::int64_t ho, std::int64_t wo,
                                std::int64_t total, const void* x, void* y,
                                std::int32_t* argmax) {
  MIXPREC_GRID_STRIDE(i, total) {
    const PlaneIndex p = plane_index(d.channels_last, i, d.c, ho * wo);
    const PlaneLayout in = plane_layout(d.channels_last, p.n, p.c, d.c, d.h * d.w);
    const std::int64_t out = p.k;
    const pool::Span ry = pool::window(out / wo, d, d.h), rx = pool::window(out % wo, d, d.w);
    const std::int64_t best = pool::window_argmax(
        ry, rx, d.w, [&](std::int64_t k) { return load(x, d.dtype, in.at(k)); });
    copy_element(x, in.at(best), y, i, d.dtype);
    if (argmax != nullptr) argmax[i] = static_cast<std::int32_t>(best);
  }
}

__global__ void avg_pool_kernel(Pool2dDesc d, std::int64_t ho, std::int64_t wo,
                                std::int64_t total, const void* x, void* y) {
  MIXPREC_GRID_STRIDE(i, total) {
    const PlaneIndex p = plane_index(d.channels_last, i, d.c, ho * wo);
    const PlaneLayout in = plane_layout(d.channels_last, p.n, p.c, d.c, d.h * d.w);
    const std::int64_t out = p.k;
    const pool::Span ry = pool::window(out / wo, d, d.h), rx = pool::window(out % wo, d, d.w);
    store(y, d.dtype, i, pool::window_mean(ry, rx, d.w, [&](std::int64_t k) {
            return load(x, d.dtype, in.at(k));
          }));
  }
}

__global__ void max_pool_backward_kernel(Pool2dDesc d, std::int64_t ho, std::int64_t wo,
                                         std::int64_t total, const void* dy,
                                         const std::int32_t* argmax, void* dx) {
  MIXPREC_GRID_STRIDE(i, total) {
    const PlaneIndex p = plane_index(d.channels_last, i, d.c, d.h * d.w);
    const PlaneLayout out_plane = plane_layout(d.channels_last, p.n, p.c, d.c, ho * wo);
    const std::int64_t in = p.k;
    const pool::Span cy = pool::covering(in / d.w, d, ho), cx = pool::covering(in % d.w, d, wo);
    float sum = 0.0f;
    for (std::int64_t oy = cy.begin; oy < cy.end; ++oy) {
      for (std::int64_t ox = cx.begin; ox < cx.end; ++ox) {
        const std::int64_t o = out_plane.at(oy * wo + ox);
        if (argmax[o] == in) sum += load(dy, d.dtype, o);
      }
    }
    store(dx, d.dtype, i, sum);
  }
}

__global__ void avg_pool_backward_kernel(Pool2dDesc d, std::int64_t ho, std::int64_t wo,
                                         std::int64_t total, const void* dy, void* dx) {
  MIXPREC_GRID_STRIDE(i, total) {
    const PlaneIndex p = plane_index(d.channels_last, i, d.c, d.h * d.w);
    const PlaneLayout out_plane = plane_layout(d.channels_last, p.n, p.c, d.c, ho * wo);
    const std::int64_t in = p.k;
    const pool::Span cy = pool::covering(in / d.w, d, ho), cx = pool::covering(in % d.w, d, wo);
    float sum = 0.0f;
    for (std::int64_t oy = cy.begin; oy < cy.end; ++oy) {
      const pool::Span ry = pool::window(oy, d, d.h);
      for (std::int64_t ox = cx.begin; ox < cx.end; ++ox) {
        const float g = load(dy, d.dtype, out_plane.at(oy * wo + ox));
        sum += g / pool::window_count(ry, pool::window(ox, d, d.w));
      }
    }
    store(dx, d.dtype, i, sum);
  }
}

constexpr int kWarpsPerBlock = kThreads / 32;

// One warp per plane: each lane sums a fixed strided subset in order, then the warp's fixed tree
// (group_reduce.cuh).
__global__ void global_avg_pool_kernel(const void* x, DType dtype, std::int64_t planes,
                                       std::int64_t hw, void* y) {
  const unsigned lane = threadIdx.x % 32;
  for (std::int64_t p = blockIdx.x * std::int64_t{kWarpsPerBlock} + threadIdx.x / 32; p < planes;
       p += std::int64_t{gridDim.x} * kWarpsPerBlock) {
    float sum = 0.0f;
    for (std::int64_t i = lane; i < hw; i += 32) sum += load(x, dtype, p * hw + i);
    sum = warp_all_reduce(sum, Add{});
    if (lane == 0) store(y, dtype, p, sum / static_cast<float>(hw));  // 0/0 = NaN, as ref
  }
}

__global__ void global_avg_pool_backward_kernel(const void* dy, DType dtype, std::int64_t hw,
                                                std::int64_t total, void* dx) {
  MIXPREC_GRID_STRIDE(i, total) {
    store(dx, dtype, i, load(dy, dtype, i / hw) / static_cast<float>(hw));
  }
}

}  // namespace

void max_pool2d(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax) {
  validate_pool2d("max_pool2d", d);
  const std::int64_t ho = d.out_h(), wo = d.out_w(), total = d.n * d.c * ho * wo;
  if (total == 0) return;
  max_pool_kernel<<<grid(total), kThreads, 0, stream()>>>(d, ho, wo, total, x, y, argmax);
  check_launch("max_pool2d");
}

void max_pool2d_backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                         void* dx) {
  validate_pool2d("max_pool2d_backward", d);
  const std::int64_t total = d.n * d.c * d.h * d.w;
  if (total == 0) return;
  max_pool_backward_kernel<<<grid(total), kThreads, 0, stream()>>>(d, d.out_h(), d.out_w(), total,
                                                                   dy, argmax, dx);
  check_launch("max_pool2d_backward");
}

void avg_pool2d(const Pool2dDesc& d, const void* x, void* y) {
  validate_pool2d("avg_pool2d", d);
  const std::int64_t ho = d.out_h(), wo = d.out_w(), total = d.n * d.c * ho * wo;
  if (total == 0) return;
  avg_pool_kernel<<<grid(total), kThreads, 0, stream()>>>(d, ho, wo, total, x, y);
  check_launch("avg_pool2d");
}

void avg_pool2d_backward(const Pool2dDesc& d, const void* dy, void* dx) {
  validate_pool2d("avg_pool2d_backward", d);
  const std::int64_t total = d.n * d.c * d.h * d.w;
  if (total == 0) return;
  avg_pool_backward_kernel<<<grid(total), kThreads, 0, stream()>>>(d, d.out_h(), d.out_w(), total,
                                                                   dy, dx);
  check_launch("avg_pool2d_backward");
}

void global_avg_pool2d(const void* x, DType dtype, std::int64_t planes, std::int64_t hw,
                       void* y) {
  MIXPREC_CHECK(planes >= 0 && hw >= 0, ShapeError, "global_avg_pool2d",
                "negative extent (" << planes << " planes of " << hw << " elements)");
  dispatch(dtype, [](auto) {});  // the reference's DTypeError for a storage-only dtype
  if (planes == 0) return;
  const std::int64_t blocks = (planes + kWarpsPerBlock - 1) / kWarpsPerBlock;
  global_avg_pool_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(blocks, 65535)), kThreads,
                           0, stream()>>>(x, dtype, planes, hw, y);
  check_launch("global_avg_pool2d");
}

void global_avg_pool2d_backward(const void* dy, DType dtype, std::int64_t planes,
                                std::int64_t hw, void* dx) {
  MIXPREC_CHECK(planes >= 0 && hw >= 0, ShapeError, "global_avg_pool2d_backward",
                "negative extent (" << planes << " planes of " << hw << " elements)");
  dispatch(dtype, [](auto) {});  // the reference's DTypeError for a storage-only dtype
  const std::int64_t total = planes * hw;
  if (total == 0) return;
  global_avg_pool_backward_kernel<<<grid(total), kThreads, 0, stream()>>>(dy, dtype, hw, total,
                                                                          dx);
  check_launch("global_avg_pool2d_backward");
}

}  // namespace mixprec::kernels::cuda
