// The CUDA softmax, log-softmax and cross-entropy kernels: one group of threads per row (a warp
// for rows up to 1024 values, else a block), each thread taking every G-th value of the row, the
// row's max and sums then a fixed tree (group_reduce.cuh): deterministic, f32 like the
// reference, whose sequential sums they match to rounding. Every per-element and per-row formula
// is the reference's own (kernels/spec/softmax_math.h); exp and log are CUDA's (within the
// conformance tolerance of the host's).
//
// Cross-entropy's loss, its gradient, or both in one pass over the logits (the fused kernel)
// are one kernel with the outputs it is not asked for switched off, so the fused results are
// the separate kernels' bits by construction.
//
// Targets are device memory, so the cross-entropy kernels check them on the device (one block
// finds the first row whose target is out of range) into a deferred check: the reference's
// ValueError, message and all, raised at the host's next synchronisation rather than at one of
// its own per call.
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/spec/softmax_checks.h"
#include "kernels/softmax.h"
#include "kernels/spec/softmax_math.h"
#include "core/cuda_runtime.h"

namespace mixprec::kernels::cuda {
namespace {

/// The NaN-propagating max of two partial row maxima (the reference's step, which keeps the
/// first NaN it meets).
struct RowMax {
  __device__ float operator()(float a, float b) const { return softmax_math::row_max_step(a, b); }
};

/// The max of row values x[0], x[G], ... of this thread, then of the group.
template <int G>
__device__ float group_row_max(const void* x, DType t, std::int64_t base, std::int64_t cols) {
  float m = -INFINITY;
  for (std::int64_t c = Group<G>::lane(); c < cols; c += G) {
    m = softmax_math::row_max_step(m, load(x, t, base + c));
  }
  return Group<G>::all_reduce(m, RowMax{});
}

/// sum(exp(x - m)) over the row.
template <int G>
__device__ float group_exp_sum(const void* x, DType t, std::int64_t base, std::int64_t cols,
                               float m) {
  float sum = 0.0f;
  for (std::int64_t c = Group<G>::lane(); c < cols; c += G) sum += expf(load(x, t, base + c) - m);
  return Group<G>::all_reduce(sum, Add{});
}

template <int G>
__global__ void softmax_kernel(const void* in, DType din, std::int64_t rows, std::int64_t cols,
                               void* out, DType dout, bool log) {
  using Grp = Group<G>;
  for (std::int64_t r = Grp::first_item(); r < rows; r += Grp::item_stride()) {
    const std::int64_t base = r * cols;
    const float m = group_row_max<G>(in, din, base, cols);
    const float sum = group_exp_sum<G>(in, din, base, cols, m);
    if (log) {
      const float lse = logf(sum);
      for (std::int64_t c = Grp::lane(); c < cols; c += G) {
        const float x = load(in, din, base + c);
        store(out, dout, base + c, softmax_math::log_softmax_value(x, m, lse));
      }
    } else {
      const float inv = 1.0f / sum;
      for (std::int64_t c = Grp::lane(); c < cols; c += G) {
        const float x = load(in, din, base + c);
        store(out, dout, base + c, softmax_math::softmax_value(x, m, inv));
      }
    }
  }
}

template <int G>
__global__ void softmax_backward_kernel(const void* y, DType dy_t, const void* dy, DType dg_t,
                                        std::int64_t rows, std::int64_t cols, void* dx,
                                        DType dx_t, bool log) {
  using Grp = Group<G>;
  for (std::int64_t r = Grp::first_item(); r < rows; r += Grp::item_stride()) {
    const std::int64_t base = r * cols;
    float s = 0.0f;  // log: sum(dy); else sum(dy * y)
    for (std::int64_t c = Grp::lane(); c < cols; c += G) {
      const float g = load(dy, dg_t, base + c);
      s += log ? g : g * load(y, dy_t, base + c);
    }
    s = Grp::all_reduce(s, Add{});
    for (std::int64_t c = Grp::lane(); c < cols; c += G) {
      const float g = load(dy, dg_t, base + c);
      const float v = load(y, dy_t, base + c);
      store(dx, dx_t, base + c,
            log ? softmax_math::log_softmax_grad(g, v, s) : softmax_math::softmax_grad(g, v, s));
    }
  }
}

/// Every cross-entropy kernel in one: per row the loss into loss_per_row (when not null) and
/// g * (softmax - q) into dlogits (when not null), so that the fused kernel has the separate
/// ones' bits by construction. In place (dlogits == logits, loss_per_row == grad_per_row) each
/// thread writes only the values it read itself, except the target's logit and the row's
/// gradient, which are read before a barrier that every write of the row follows.
template <int G>
__global__ void cross_entropy_kernel(const void* logits, DType t, std::int64_t rows,
                                     std::int64_t cols, const std::int64_t* targets, float s,
                                     float off, const float* grad_per_row, float* loss_per_row,
                                     void* dlogits, DType dout) {
  using Grp = Group<G>;
  for (std::int64_t r = Grp::first_item(); r < rows; r += Grp::item_stride()) {
    const std::int64_t base = r * cols;
    const std::int64_t target = targets[r];  // a bad one is reported by check_targets
    const float g = dlogits != nullptr ? grad_per_row[r] : 0.0f;
    const float m = group_row_max<G>(logits, t, base, cols);
    const float sum = group_exp_sum<G>(logits, t, base, cols, m);
    float loss = 0.0f;  // lane 0's
    if (loss_per_row != nullptr) {
      const float lse = logf(sum);
      const float x_t = Grp::lane() == 0 && target >= 0 && target < cols
                            ? load(logits, t, base + target)
                            : NAN;
      float sum_logp = 0.0f;
      for (std::int64_t c = Grp::lane(); c < cols; c += G) {
        sum_logp += softmax_math::log_softmax_value(load(logits, t, base + c), m, lse);
      }
      sum_logp = Grp::all_reduce(sum_logp, Add{});
      loss = softmax_math::cross_entropy_loss(softmax_math::log_softmax_value(x_t, m, lse),
                                              sum_logp, s, cols);
    }
    if (dlogits != nullptr) {  // both outputs may alias inputs: every read before any write
      if constexpr (G == kWarp) {
        __syncwarp();
      } else {
        __syncthreads();
      }
    }
    if (loss_per_row != nullptr && Grp::lane() == 0) loss_per_row[r] = loss;
    if (dlogits == nullptr) continue;
    const float inv = 1.0f / sum;
    for (std::int64_t c = Grp::lane(); c < cols; c += G) {
      store(dlogits, dout, base + c,
            softmax_math::cross_entropy_grad(g, load(logits, t, base + c), m, inv, c == target,
                                             off, s));
    }
  }
}

/// x *= *num / *den, unless the two scalars have the same bits (every thread reads both and
/// returns at once: the host reads nothing).
__global__ void rescale_unless_equal_kernel(void* x, DType t, std::int64_t n, const float* num,
                                            const float* den) {
  const float a = *num, b = *den;
  if (softmax_math::same_bits(a, b)) return;
  const float ratio = a / b;
  MIXPREC_GRID_STRIDE(i, n) store(x, t, i, load(x, t, i) * ratio);
}

struct Min {
  __device__ std::int64_t operator()(std::int64_t a, std::int64_t b) const { return a < b ? a : b; }
};

/// The first row whose target is outside [0, cols) and its target, in one block, written to
/// verdict (host-mapped, preset to {-1, 0}) only when there is one.
__global__ void first_bad_target_kernel(const std::int64_t* targets, std::int64_t rows,
                                        std::int64_t cols, std::int64_t* verdict) {
  std::int64_t first = rows;
  for (std::int64_t r = threadIdx.x; r < rows; r += kThreads) {
    if (targets[r] < 0 || targets[r] >= cols) {
      first = r;
      break;  // this thread's rows only grow
    }
  }
  first = block_all_reduce(first, Min{});
  if (threadIdx.x == 0 && first < rows) {
    verdict[0] = first;
    verdict[1] = targets[first];
  }
}

/// The reference's checks (softmax_checks.h) with targets in device memory. The target check
/// is deferred (core/deferred_checks.h): its error is raised at the host's next synchronisation
/// (the step's loss read), so it costs the step no synchronisation of its own; meanwhile the
/// kernels read no logit through a bad target.
void check_targets(const char* op, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing) {
  detail::check_cross_entropy_scalars(op, rows, cols, targets, label_smoothing);
  if (rows == 0) return;
  std::int64_t* verdict = mixprec::detail::cuda_defer_check([op, cols](const std::int64_t* v) {
    if (v[0] >= 0) detail::check_cross_entropy_target(op, v[0], v[1], cols);
  });
  first_bad_target_kernel<<<1, kThreads, 0, stream()>>>(targets, rows, cols, verdict);
  check_launch(op);
}

/// Rows of up to 1024 values: a warp each; longer: a block each.
bool warp_rows(std::int64_t cols) { return cols <= 1024; }

}  // namespace

void softmax(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
             DType out_dtype, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
  if (rows == 0 || cols == 0) return;
  if (warp_rows(cols)) {
    softmax_kernel<kWarp><<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(
        in, in_dtype, rows, cols, out, out_dtype, log);
  } else {
    softmax_kernel<kThreads><<<group_grid<kThreads>(rows), kThreads, 0, stream()>>>(
        in, in_dtype, rows, cols, out, out_dtype, log);
  }
  check_launch(op);
}

void softmax_backward(const void* y, DType y_dtype, const void* dy, DType dy_dtype,
                      std::int64_t rows, std::int64_t cols, void* dx, DType dx_dtype, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
  if (rows == 0 || cols == 0) return;
  if (warp_rows(cols)) {
    softmax_backward_kernel<kWarp><<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(
        y, y_dtype, dy, dy_dtype, rows, cols, dx, dx_dtype, log);
  } else {
    softmax_backward_kernel<kThreads><<<group_grid<kThreads>(rows), kThreads, 0, stream()>>>(
        y, y_dtype, dy, dy_dtype, rows, cols, dx, dx_dtype, log);
  }
  check_launch(op);
}

namespace {
/// Launches cross_entropy_kernel for whichever outputs are not null.
void launch_cross_entropy(const char* op, const void* logits, DType dtype, std::int64_t rows,
                          std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                          const float* grad_per_row, float* loss_per_row, void* dlogits,
                          DType dlogits_dtype) {
  const float off = softmax_math::cross_entropy_off_mass(label_smoothing, cols);
  if (warp_rows(cols)) {
    cross_entropy_kernel<kWarp><<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(
        logits, dtype, rows, cols, targets, label_smoothing, off, grad_per_row, loss_per_row,
        dlogits, dlogits_dtype);
  } else {
    cross_entropy_kernel<kThreads><<<group_grid<kThreads>(rows), kThreads, 0, stream()>>>(
        logits, dtype, rows, cols, targets, label_smoothing, off, grad_per_row, loss_per_row,
        dlogits, dlogits_dtype);
  }
  check_launch(op);
}
}  // namespace

void cross_entropy(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing, float* loss_per_row) {
  const char* op = "cross_entropy";
  check_targets(op, rows, cols, targets, label_smoothing);
  if (rows == 0) return;  // cols >= 1 here: every target is in [0, cols)
  launch_cross_entropy(op, logits, dtype, rows, cols, targets, label_smoothing, nullptr,
                       loss_per_row, nullptr, dtype);
}

void cross_entropy_backward(const void* logits, DType dtype, std::int64_t rows,
                            std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                            const float* grad_per_row, void* dlogits, DType dlogits_dtype) {
  const char* op = "cross_entropy_backward";
  check_targets(op, rows, cols, targets, label_smoothing);
  if (rows == 0) return;
  launch_cross_entropy(op, logits, dtype, rows, cols, targets, label_smoothing, grad_per_row,
                       nullptr, dlogits, dlogits_dtype);
}

void cross_entropy_fused(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                         const std::int64_t* targets, float label_smoothing,
                         const float* grad_per_row, float* loss_per_row, void* dlogits,
                         DType dlogits_dtype) {
  const char* op = "cross_entropy_fused";
  check_targets(op, rows, cols, targets, label_smoothing);
  detail::check_cross_entropy_alias(op, logits, dtype, dlogits, dlogits_dtype, rows, cols,
                                    grad_per_row, loss_per_row);
  if (rows == 0) return;
  launch_cross_entropy(op, logits, dtype, rows, cols, targets, label_smoothing, grad_per_row,
                       loss_per_row, dlogits, dlogits_dtype);
}

void rescale_unless_equal(void* x, DType dtype, std::int64_t n, const float* num,
                          const float* den) {
  const char* op = "rescale_unless_equal";
  MIXPREC_CHECK(n >= 0, ShapeError, op, "negative extent " << n);
  if (n == 0) return;
  rescale_unless_equal_kernel<<<grid(n), kThreads, 0, stream()>>>(x, dtype, n, num, den);
  check_launch(op);
}

}  // namespace mixprec::kernels::cuda
