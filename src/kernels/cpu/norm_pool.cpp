// The fused batch norm + ReLU + max pool on the CPU. Channels-last activations take one-pass
// Highway rows (norm_pool_simd.cpp): the forward computes the batch statistics as
// batch_norm_forward does and then writes only the pooled output and a byte of argmax per
// value; the backward reads x, the pooled y, dy and those bytes twice (once for the gradient
// sums, once for dx) instead of a full-size gradient, int32 argmax and ReLU mask. NCHW runs the
// cpu's batch norm and pooling kernels through full-size scratches (the unfused work, same
// bits). Window rows run in parallel; the gradient
// sums add per window row in f32, widen to double per fixed block of window rows and combine in
// block order, so results never depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu/batch_norm_stats.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/growing_buffer.h"
#include "kernels/cpu/norm_pool_simd.h"
#include "kernels/norm.h"
#include "kernels/spec/norm_math.h"
#include "kernels/spec/pool_math.h"

namespace mixprec::kernels::cpu {
namespace {

namespace simd = norm_pool_simd;

/// Window rows per block of the gradient sums (fixed, so the sums are too).
constexpr std::int64_t kSumRows = 8;

std::vector<std::byte> scratch_of(std::int64_t count, DType t) {
  return std::vector<std::byte>(static_cast<std::size_t>(count) * size_of(t));
}

/// The per-channel factors of the normalisation: scale = invstd * weight, shift = bias.
struct Factors {
  std::vector<float> scale, shift;
  Factors(const Pool2dDesc& d, const float* var, float eps, const float* weight,
          const float* bias)
      : scale(static_cast<std::size_t>(d.c)), shift(static_cast<std::size_t>(d.c)) {
    for (std::int64_t c = 0; c < d.c; ++c) {
      const auto i = static_cast<std::size_t>(c);
      scale[i] = norm_invstd(var[c], eps) * (weight != nullptr ? weight[c] : 1.0f);
      shift[i] = bias != nullptr ? bias[c] : 0.0f;
    }
  }
};

/// Where window row i (sample i / ho, output row i % ho) starts in x (and dx).
std::int64_t input_row_offset(const Pool2dDesc& d, std::int64_t i) {
  const std::int64_t ho = d.out_h();
  return ((i / ho) * d.h + (i % ho) * d.kernel) * d.w * d.c;
}

/// Window row i of x, with the factors.
simd::WindowRow window_row(const Pool2dDesc& d, const void* x, std::int64_t i, const float* mean,
                           const Factors& f) {
  return {at(x, d.dtype, input_row_offset(d, i)), d.dtype, d.w, d.c, d.kernel, mean,
          f.scale.data(), f.shift.data()};
}

std::int64_t pooled_row_offset(const Pool2dDesc& d, std::int64_t i) {
  return i * d.out_w() * d.c;
}

bool parallel_rows(const Pool2dDesc& d) {
  return d.n * d.c * d.h * d.w >= kParallelMinWork && d.n * d.out_h() > 1;
}

void check(const char* op, const Pool2dDesc& d, float eps, bool training) {
  detail::check_batch_norm_pool_args(op, d, eps, training);
  require_compute_dtype(op, d.dtype);  // fp8 is refused here, on the calling thread
}

/// The composition for NCHW: the argmax of max_pool2d as plane indices, and back to bytes.
void plane_indices(const Pool2dDesc& d, const std::uint8_t* window, std::int32_t* plane) {
  const std::int64_t pooled = d.n * d.c * d.out_h() * d.out_w();
  for (std::int64_t i = 0; i < pooled; ++i) plane[i] = pool::plane_index_of(d, i, window[i]);
}

}  // namespace

void batch_norm_relu_max_pool2d(const Pool2dDesc& d, const void* x, const float* weight,
                                const float* bias, float eps, bool training, float* mean,
                                float* var, void* y, std::uint8_t* argmax) {
  const char* op = "batch_norm_relu_max_pool2d";
  check(op, d, eps, training);
  const BatchNormDims dims = detail::batch_norm_dims_of(d);
  if (!d.channels_last) {
    log_reference(op, name(d.dtype), "NCHW: batch_norm_relu then max_pool2d through a scratch");
    const std::int64_t pooled = d.n * d.c * d.out_h() * d.out_w();
    std::vector<std::byte> normed = scratch_of(d.n * d.c * d.h * d.w, d.dtype);
    std::vector<std::int32_t> plane(static_cast<std::size_t>(pooled));
    batch_norm_forward(x, d.dtype, dims, weight, bias, eps, training, mean, var, normed.data(),
                       d.dtype, nullptr, true);
    max_pool2d(d, normed.data(), y, plane.data());
    if (argmax != nullptr) {
      for (std::int64_t i = 0; i < pooled; ++i) {
        argmax[i] = pool::window_index_of(d, i, plane[static_cast<std::size_t>(i)]);
      }
    }
    return;
  }
  log_simd(op, name(d.dtype));
  if (training) batch_norm_training_stats(x, d.dtype, dims, mean, var);
  const Factors f(d, var, eps, weight, bias);
  parallel_for(d.n * d.out_h(), parallel_rows(d), [&](std::int64_t i) {
    const std::int64_t out = pooled_row_offset(d, i);
    simd::forward_row(window_row(d, x, i, mean, f), at(y, d.dtype, out),
                      argmax != nullptr ? argmax + out : nullptr);
  });
}

void batch_norm_relu_max_pool2d_backward(const Pool2dDesc& d, const void* x, const void* y,
                                         const std::uint8_t* argmax, const void* dy,
                                         const float* mean, const float* var, float eps,
                                         const float* weight, bool training, void* dx,
                                         float* dweight, float* dbias) {
  const char* op = "batch_norm_relu_max_pool2d_backward";
  check(op, d, eps, training);
  const BatchNormDims dims = detail::batch_norm_dims_of(d);
  if (!d.channels_last) {
    log_reference(op, name(d.dtype), "NCHW: the unfused kernels' backward through scratches");
    const std::int64_t full = d.n * d.c * d.h * d.w, pooled = d.n * d.c * d.out_h() * d.out_w();
    std::vector<std::int32_t> plane(static_cast<std::size_t>(pooled));
    plane_indices(d, argmax, plane.data());
    // Routing y as dy is routed gives the ReLU's mask where it matters (see the reference).
    std::vector<std::byte> dnormed = scratch_of(full, d.dtype), mask = scratch_of(full, d.dtype);
    max_pool2d_backward(d, dy, plane.data(), dnormed.data());
    max_pool2d_backward(d, y, plane.data(), mask.data());
    return batch_norm_backward(x, d.dtype, dnormed.data(), d.dtype, dims, mean, var, eps, weight,
                               training, dx, d.dtype, dweight, dbias, mask.data(), nullptr);
  }
  log_simd(op, name(d.dtype));
  const auto c = static_cast<std::size_t>(d.c);
  const std::int64_t rows = d.n * d.out_h();
  const std::int64_t blocks = (rows + kSumRows - 1) / kSumRows;
  const simd::WindowRow base{x, d.dtype, d.w, d.c, d.kernel, mean, nullptr, nullptr};
  auto row = [&](std::int64_t i) {
    simd::WindowRow r = base;
    r.x = at(x, d.dtype, input_row_offset(d, i));
    return r;
  };
  // Each block's sums in double: f32 over one window row, widened after it.
  std::vector<double> part_g(static_cast<std::size_t>(blocks) * c, 0.0), part_gx(part_g.size(), 0.0);
  parallel_for(blocks, parallel_rows(d), [&](std::int64_t b) {
    thread_local GrowingBuffer scratch;  // a window row's f32 sums, per thread: no allocation
    float* acc_g = scratch.get(2 * c);
    float* acc_gx = acc_g + c;
    double* pg = part_g.data() + static_cast<std::size_t>(b) * c;
    double* pgx = part_gx.data() + static_cast<std::size_t>(b) * c;
    for (std::int64_t i = b * kSumRows; i < std::min(rows, (b + 1) * kSumRows); ++i) {
      std::fill(acc_g, acc_g + 2 * c, 0.0f);
      const std::int64_t out = pooled_row_offset(d, i);
      simd::backward_sums_row(row(i), at(y, d.dtype, out), argmax + out, at(dy, d.dtype, out),
                              acc_g, acc_gx);
      for (std::size_t j = 0; j < c; ++j) {
        pg[j] += acc_g[j];
        pgx[j] += acc_gx[j];
      }
    }
  });
  const double count = static_cast<double>(d.n * d.h * d.w);
  std::vector<float> k1(c), k2(c), k3(c);
  for (std::size_t j = 0; j < c; ++j) {
    double sum_g = 0.0, sum_gx = 0.0;
    for (std::int64_t b = 0; b < blocks; ++b) {
      sum_g += part_g[static_cast<std::size_t>(b) * c + j];
      sum_gx += part_gx[static_cast<std::size_t>(b) * c + j];
    }
    const float invstd = norm_invstd(var[j], eps);
    if (dweight != nullptr) dweight[j] = static_cast<float>(sum_gx) * invstd;
    if (dbias != nullptr) dbias[j] = static_cast<float>(sum_g);
    const BatchNormGradCoefs k = batch_norm_grad_coefs(
        var[j], eps, weight != nullptr ? weight[j] : 1.0f, sum_g, sum_gx, count, training);
    k1[j] = k.k1;
    k2[j] = k.k2;
    k3[j] = k.k3;
  }
  if (dx == nullptr) return;
  parallel_for(rows, parallel_rows(d), [&](std::int64_t i) {
    const std::int64_t out = pooled_row_offset(d, i);
    simd::backward_dx_row(row(i), at(y, d.dtype, out), argmax + out, at(dy, d.dtype, out),
                          k1.data(), k2.data(), k3.data(), at(dx, d.dtype, input_row_offset(d, i)));
  });
}

}  // namespace mixprec::kernels::cpu
