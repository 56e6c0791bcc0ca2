// Dispatching batch norm / layer norm onto the Highway runs of norm_simd.cpp (one source, every
// target). Two layouts of the work:
//  - rows: batch norm with planes of at least kMinRow values runs channel by channel, one
//    dispatched call per pass over the channel's n planes (norm_simd's rows_*, which prefetch
//    the planes ahead); a channel is summed run by run (mean), then again from L2 (variance,
//    output, or in backward the gradient sums and dx), so the two-pass variance costs little
//    more than one pass. Under a fused ReLU (and no residual) the backward reads dy and the
//    forward's output y in both its passes instead of writing the ReLU's gradient first.
//    Layer norm runs row by row the same way (a set of one row).
//  - columns: batch norm with short planes ([N, C] inputs, s < kMinRow) and layer norm's
//    dweight/dbias reduce down columns: each sample row adds into per-column f32 accumulators,
//    which are widened to double every kRowBlock rows.
// f32 sums never cover more than kRun values (or kRowBlock rows) before being added in double,
// so the statistics stay within a few f32 roundings of the double-accumulating reference.
// Threads: channels, rows or fixed (row block x column chunk) tiles, each reduced by one thread
// in a fixed order and combined in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/batch_norm_stats.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/elementwise_simd.h"
#include "kernels/cpu/growing_buffer.h"
#include "kernels/cpu/norm_simd.h"
#include "kernels/norm.h"
#include "kernels/spec/norm_math.h"

namespace mixprec::kernels {
namespace {

namespace simd = cpu::norm_simd;

/// Planes shorter than this take the per-column path: a call per plane would cost more than it.
constexpr std::int64_t kMinRow = 16;
/// Rows a per-column f32 accumulator takes before it is widened to double.
constexpr std::int64_t kRowBlock = 64;
/// Rows and columns of one task of a per-column reduction (fixed, so results are too).
constexpr std::int64_t kTaskRows = 256;
constexpr std::int64_t kColChunk = 1024;

bool parallel_over(std::int64_t work, std::int64_t count) {
  return work >= cpu::kParallelMinWork && count > 1;
}

/// Column sums of a [rows, cols] reduction into out0 (and out1 if not null), in double.
/// add_rows(r0, count, j0, len, acc0, acc1) adds rows [r0, r0 + count) (in order) of columns
/// [j0, j0 + len) into f32 accumulators: one call per block of at most kRowBlock rows.
/// Tiles of kTaskRows x kColChunk run in parallel; their partial sums are added in tile order.
template <class AddRows>
void column_sums(std::int64_t rows, std::int64_t cols, double* out0, double* out1,
                 const AddRows& add_rows) {
  const std::int64_t row_tasks = std::max<std::int64_t>(1, (rows + kTaskRows - 1) / kTaskRows);
  const std::int64_t col_tasks = (cols + kColChunk - 1) / kColChunk;
  const auto part_size = static_cast<std::size_t>(row_tasks * cols);
  std::vector<double> part0(part_size, 0.0), part1(out1 != nullptr ? part_size : 0, 0.0);
  cpu::parallel_for(row_tasks * col_tasks, parallel_over(rows * cols, row_tasks * col_tasks),
                    [&](std::int64_t task) {
    const std::int64_t rt = task / col_tasks, j0 = (task % col_tasks) * kColChunk;
    const std::int64_t len = std::min(kColChunk, cols - j0);
    const std::int64_t r_end = std::min(rows, (rt + 1) * kTaskRows);
    std::vector<float> a0(static_cast<std::size_t>(len)), a1(static_cast<std::size_t>(len));
    double* p0 = part0.data() + rt * cols + j0;
    double* p1 = out1 != nullptr ? part1.data() + rt * cols + j0 : nullptr;
    for (std::int64_t r0 = rt * kTaskRows; r0 < r_end; r0 += kRowBlock) {
      std::fill(a0.begin(), a0.end(), 0.0f);
      std::fill(a1.begin(), a1.end(), 0.0f);
      add_rows(r0, std::min(r_end, r0 + kRowBlock) - r0, j0, len, a0.data(), a1.data());
      for (std::int64_t j = 0; j < len; ++j) {
        p0[j] += a0[static_cast<std::size_t>(j)];
        if (p1 != nullptr) p1[j] += a1[static_cast<std::size_t>(j)];
      }
    }
  });
  for (std::int64_t j = 0; j < cols; ++j) {
    double s0 = 0.0, s1 = 0.0;
    for (std::int64_t rt = 0; rt < row_tasks; ++rt) {
      s0 += part0[static_cast<std::size_t>(rt * cols + j)];
      if (out1 != nullptr) s1 += part1[static_cast<std::size_t>(rt * cols + j)];
    }
    out0[j] = s0;
    if (out1 != nullptr) out1[j] = s1;
  }
}

/// Runs body(r0, count) over blocks of consecutive rows of a [rows, cols] tensor, in parallel
/// when large: an element-wise pass, so any split gives the same bits; blocks of about
/// kBlockElements values keep the calls few when rows are short (channels-last: C values each).
template <class Body>
void over_row_blocks(std::int64_t rows, std::int64_t cols, const Body& body) {
  constexpr std::int64_t kBlockElements = 16384;
  const std::int64_t per_block = std::max<std::int64_t>(1, kBlockElements / std::max<std::int64_t>(cols, 1));
  const std::int64_t blocks = (rows + per_block - 1) / per_block;
  cpu::parallel_for(blocks, parallel_over(rows * cols, blocks), [&](std::int64_t b) {
    const std::int64_t r0 = b * per_block;
    body(r0, std::min(per_block, rows - r0));
  });
}

/// Per-channel totals of per-column sums (column j belongs to channel j / s).
std::vector<double> channel_totals(const std::vector<double>& col, BatchNormDims d) {
  std::vector<double> t(static_cast<std::size_t>(d.c), 0.0);
  for (std::int64_t j = 0; j < d.c * d.s; ++j) t[static_cast<std::size_t>(j / d.s)] += col[static_cast<std::size_t>(j)];
  return t;
}

/// Per-channel values repeated over each channel's s columns.
std::vector<float> expand(const float* per_channel, BatchNormDims d) {
  std::vector<float> v(static_cast<std::size_t>(d.c * d.s));
  for (std::int64_t j = 0; j < d.c * d.s; ++j) v[static_cast<std::size_t>(j)] = per_channel[j / d.s];
  return v;
}

void check_dtypes(const char* op, std::initializer_list<DType> types) {
  // fp8 is refused here, on the calling thread (the runs dispatch inside parallel regions).
  for (DType t : types) require_compute_dtype(op, t);
}

/// The fused epilogue on `len` values of y from element `offset` (y holds batch norm's output,
/// already rounded): + residual, then ReLU, each a pass over values still in L1, rounded as
/// the add and relu ops round (norm_math::batch_norm_epilogue's steps, on the SIMD rows).
void epilogue_run(void* y, DType ty, const void* residual, bool relu, std::int64_t offset,
                  std::int64_t len) {
  void* out = cpu::at(y, ty, offset);
  if (residual != nullptr) {
    cpu::binary_row(BinaryOp::add, out, ty, cpu::at(residual, ty, offset), ty,
                    cpu::ScalarSide::none, 0.0f, out, ty, len);
  }
  if (relu) cpu::unary_row(UnaryOp::relu, out, ty, out, ty, len);
}

/// The gradient batch norm receives under its epilogue, for `len` values of dy from `offset`,
/// written to out at out_offset in dy's dtype: dy through the fused ReLU (relu's rule on the
/// output y) when relu_y is set, else dy itself. Exact: each value is dy's or 0.
void epilogue_grad_run(const void* relu_y, const void* dy, DType tdy, std::int64_t offset,
                       std::int64_t len, void* out, std::int64_t out_offset) {
  void* o = cpu::at(out, tdy, out_offset);
  if (relu_y == nullptr) {
    std::memcpy(o, cpu::at(dy, tdy, offset), static_cast<std::size_t>(len) * size_of(tdy));
    return;
  }
  cpu::unary_backward_row(UnaryOp::relu, cpu::at(relu_y, tdy, offset), tdy,
                          cpu::at(dy, tdy, offset), tdy, o, tdy, len);
}

/// Scratch of at least `bytes`, kept per thread (a channel's gradient rows, or a whole
/// gradient on the per-column path), so steady-state calls allocate nothing.
void* grad_scratch(std::size_t bytes) {
  thread_local cpu::GrowingBuffer buffer;
  return buffer.get((bytes + sizeof(float) - 1) / sizeof(float));
}

// ---- batch norm, per-column path ([N, C] and planes shorter than kMinRow) ----

/// Training statistics on the per-column path: the sum of each column in double, the channel's
/// mean rounded to f32, then the squared deviations from it.
void cols_training_stats(const void* x, DType tx, BatchNormDims d, float* mean, float* var) {
  const std::int64_t cols = d.c * d.s;
  const double count = static_cast<double>(d.n * d.s);
  {
    std::vector<double> col(static_cast<std::size_t>(cols));
    column_sums(d.n, cols, col.data(), nullptr,
                [&](std::int64_t r0, std::int64_t nrows, std::int64_t j0, std::int64_t len, float* a0, float*) {
                  simd::cols_acc(cpu::at(x, tx, r0 * cols + j0), tx, nrows, cols, len, nullptr, a0);
                });
    const std::vector<double> sum = channel_totals(col, d);
    for (std::int64_t c = 0; c < d.c; ++c) mean[c] = static_cast<float>(sum[static_cast<std::size_t>(c)] / count);
    const std::vector<float> mean_col = expand(mean, d);
    column_sums(d.n, cols, col.data(), nullptr,
                [&](std::int64_t r0, std::int64_t nrows, std::int64_t j0, std::int64_t len, float* a0, float*) {
                  simd::cols_acc(cpu::at(x, tx, r0 * cols + j0), tx, nrows, cols, len,
                                 mean_col.data() + j0, a0);
                });
    const std::vector<double> sq = channel_totals(col, d);
    for (std::int64_t c = 0; c < d.c; ++c) var[c] = static_cast<float>(sq[static_cast<std::size_t>(c)] / count);
  }
}

void batch_norm_forward_cols(const void* x, DType tx, BatchNormDims d, const float* weight,
                             const float* bias, float eps, bool training, float* mean,
                             float* var, void* y, DType ty, const void* residual, bool relu) {
  const std::int64_t cols = d.c * d.s;
  if (training) cols_training_stats(x, tx, d, mean, var);
  std::vector<float> scale(static_cast<std::size_t>(d.c)), shift(static_cast<std::size_t>(d.c));
  for (std::int64_t c = 0; c < d.c; ++c) {
    scale[static_cast<std::size_t>(c)] = norm_invstd(var[c], eps) * (weight != nullptr ? weight[c] : 1.0f);
    shift[static_cast<std::size_t>(c)] = bias != nullptr ? bias[c] : 0.0f;
  }
  const std::vector<float> mean_col = expand(mean, d), scale_col = expand(scale.data(), d),
                           shift_col = expand(shift.data(), d);
  // A lone ReLU is fused into the pass (as on the row path); a residual add (then the ReLU)
  // follows each block while it is still in cache.
  over_row_blocks(d.n, cols, [&](std::int64_t n0, std::int64_t nrows) {
    simd::cols_affine(cpu::at(x, tx, n0 * cols), tx, nrows, cols, cols, mean_col.data(),
                      scale_col.data(), shift_col.data(), relu && residual == nullptr,
                      cpu::at(y, ty, n0 * cols), ty);
    if (residual != nullptr) epilogue_run(y, ty, residual, relu, n0 * cols, nrows * cols);
  });
}

/// One channel's n rows of s values in a buffer: in the [n, c, s] layout (stride c * s) or in
/// a scratch of its own (stride s).
struct ChannelRows {
  const void* p;
  DType t;
  std::int64_t first, stride;  // elements

  static ChannelRows of(const void* p, DType t, BatchNormDims d, std::int64_t c) {
    return {p, t, c * d.s, d.c * d.s};
  }
  simd::Rows rows() const { return {cpu::at(p, t, first), t, stride}; }
};

/// Channel c's n rows of an [n, c, s] tensor, for reading or writing.
simd::Rows channel_of(const void* p, DType t, BatchNormDims d, std::int64_t c) {
  return ChannelRows::of(p, t, d, c).rows();
}
simd::MutableRows channel_of(void* p, DType t, BatchNormDims d, std::int64_t c) {
  return {cpu::at(p, t, c * d.s), t, d.c * d.s};
}

/// Channel c's sums of g and of g * (x - m), added run by run into *sum_dy, *sum_dy_xmu; g is
/// dy's rows, through the fused ReLU when relu_y (the forward's output, dy's layout) is set.
void channel_backward_sums(const void* x, DType tx, const ChannelRows& dy, const void* relu_y,
                           BatchNormDims d, std::int64_t c, float m, double* sum_dy,
                           double* sum_dy_xmu) {
  simd::rows_backward_sums(channel_of(x, tx, d, c), dy.rows(),
                           relu_y == nullptr ? nullptr : cpu::at(relu_y, dy.t, dy.first),
                           {d.n, d.s}, m, sum_dy, sum_dy_xmu);
}

/// Per-channel sums of g and g * (x - mean) on the per-column path (tiles of column sums); g is
/// dy, through the fused ReLU as it is read when relu_y (dy's dtype and layout) is set.
void backward_sums_cols(const void* x, DType tx, const void* dy, DType tdy, const void* relu_y,
                        BatchNormDims d, const float* mean, double* sum_dy, double* sum_dy_xmu) {
  const std::int64_t cols = d.c * d.s;
  const std::vector<float> mean_col = expand(mean, d);
  std::vector<double> col_dy(static_cast<std::size_t>(cols)), col_dy_xmu(col_dy.size());
  column_sums(d.n, cols, col_dy.data(), col_dy_xmu.data(),
              [&](std::int64_t r0, std::int64_t nrows, std::int64_t j0, std::int64_t len, float* a0,
                  float* a1) {
                simd::cols_backward_acc(
                    cpu::at(x, tx, r0 * cols + j0), tx, cpu::at(dy, tdy, r0 * cols + j0), tdy,
                    relu_y == nullptr ? nullptr : cpu::at(relu_y, tdy, r0 * cols + j0), nrows, cols,
                    len, mean_col.data() + j0, a0, a1);
              });
  const std::vector<double> a = channel_totals(col_dy, d), b = channel_totals(col_dy_xmu, d);
  std::copy(a.begin(), a.end(), sum_dy);
  std::copy(b.begin(), b.end(), sum_dy_xmu);
}

void batch_norm_backward_cols(const void* x, DType tx, const void* dy, DType tdy,
                              const void* relu_y, BatchNormDims d, const float* mean,
                              const float* var, float eps,
                              const float* weight, bool training, void* dx, DType tdx,
                              float* dweight, float* dbias) {
  const std::int64_t cols = d.c * d.s;
  const double count = static_cast<double>(d.n * d.s);
  const std::vector<float> mean_col = expand(mean, d);
  std::vector<double> sum_dy(static_cast<std::size_t>(d.c)), sum_dy_xmu(sum_dy.size());
  backward_sums_cols(x, tx, dy, tdy, relu_y, d, mean, sum_dy.data(), sum_dy_xmu.data());
  std::vector<float> k1(static_cast<std::size_t>(d.c)), k2(k1.size()), k3(k1.size());
  for (std::int64_t c = 0; c < d.c; ++c) {
    const auto i = static_cast<std::size_t>(c);
    const float invstd = norm_invstd(var[c], eps);
    if (dweight != nullptr) dweight[c] = static_cast<float>(sum_dy_xmu[i]) * invstd;
    if (dbias != nullptr) dbias[c] = static_cast<float>(sum_dy[i]);
    const BatchNormGradCoefs k = batch_norm_grad_coefs(
        var[c], eps, weight != nullptr ? weight[c] : 1.0f, sum_dy[i], sum_dy_xmu[i], count, training);
    k1[i] = k.k1;
    k2[i] = k.k2;
    k3[i] = k.k3;
  }
  if (dx == nullptr) return;
  const std::vector<float> k1c = expand(k1.data(), d), k2c = expand(k2.data(), d),
                           k3c = expand(k3.data(), d);
  over_row_blocks(d.n, cols, [&](std::int64_t n0, std::int64_t nrows) {
    simd::cols_backward_dx(cpu::at(x, tx, n0 * cols), tx, cpu::at(dy, tdy, n0 * cols), tdy,
                           relu_y == nullptr ? nullptr : cpu::at(relu_y, tdy, n0 * cols), nrows,
                           cols, cols, mean_col.data(), k1c.data(), k2c.data(), k3c.data(),
                           cpu::at(dx, tdx, n0 * cols), tdx);
  });
}

// One channel's statistics over rows of at least kMinRow: the sum in double, the mean rounded to
// f32, then the squared deviations from that f32 mean. batch_norm's forward and the synchronised
// statistics (batch_norm_stats) share these passes, so they agree bit for bit.
struct ChannelPasses {
  double sum = 0.0, sq_dev = 0.0;
  float mean = 0.0f;
};
ChannelPasses channel_passes(const void* x, DType x_dtype, BatchNormDims d, std::int64_t c, double count) {
  ChannelPasses p;
  const simd::Rows rows = channel_of(x, x_dtype, d, c);
  p.sum = simd::rows_sum(rows, {d.n, d.s});
  p.mean = static_cast<float>(p.sum / count);
  p.sq_dev = simd::rows_sq_dev_sum(rows, {d.n, d.s}, p.mean);
  return p;
}

}  // namespace

namespace cpu {
void batch_norm_training_stats(const void* x, DType x_dtype, BatchNormDims d, float* mean,
                               float* var) {
  if (d.s < kMinRow) return cols_training_stats(x, x_dtype, d, mean, var);
  const double count = static_cast<double>(d.n * d.s);
  parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    const ChannelPasses p = channel_passes(x, x_dtype, d, c, count);
    mean[c] = p.mean;
    var[c] = static_cast<float>(p.sq_dev / count);
  });
}

void batch_norm_stats(const void* x, DType x_dtype, BatchNormDims d, double* mean, double* m2) {
  const char* op = "batch_norm_stats";
  detail::check_batch_norm_args(op, d, 0.0f, false);
  check_dtypes(op, {x_dtype});
  log_simd(op, dtype_label(x_dtype, x_dtype));
  const double count = static_cast<double>(d.n * d.s);
  // Sums in double (f32 runs), then squared deviations from the f32-rounded mean m as the fused
  // forward computes them, corrected to the double mean: sum (x - mean)^2 = sum (x - m)^2 -
  // count * (mean - m)^2 exactly.
  auto finish = [&](std::int64_t c, double sum, double sq, float m) {
    const double md = sum / count;
    const double v = sq - count * (md - m) * (md - m);
    mean[c] = md;
    m2[c] = v < 0.0 ? 0.0 : v;  // rounding may dip below 0; NaN stays NaN
  };
  if (count == 0) {
    std::fill_n(mean, d.c, 0.0);
    std::fill_n(m2, d.c, 0.0);
    return;
  }
  if (d.s < kMinRow) {
    const std::int64_t cols = d.c * d.s;
    std::vector<double> col(static_cast<std::size_t>(cols));
    column_sums(d.n, cols, col.data(), nullptr,
                [&](std::int64_t r0, std::int64_t nrows, std::int64_t j0, std::int64_t len, float* a0, float*) {
                  simd::cols_acc(at(x, x_dtype, r0 * cols + j0), x_dtype, nrows, cols, len, nullptr, a0);
                });
    const std::vector<double> sum = channel_totals(col, d);
    std::vector<float> m(static_cast<std::size_t>(d.c));
    for (std::int64_t c = 0; c < d.c; ++c) {
      m[static_cast<std::size_t>(c)] = static_cast<float>(sum[static_cast<std::size_t>(c)] / count);
    }
    const std::vector<float> mean_col = expand(m.data(), d);
    column_sums(d.n, cols, col.data(), nullptr,
                [&](std::int64_t r0, std::int64_t nrows, std::int64_t j0, std::int64_t len, float* a0, float*) {
                  simd::cols_acc(at(x, x_dtype, r0 * cols + j0), x_dtype, nrows, cols, len,
                                 mean_col.data() + j0, a0);
                });
    const std::vector<double> sq = channel_totals(col, d);
    for (std::int64_t c = 0; c < d.c; ++c) {
      const auto i = static_cast<std::size_t>(c);
      finish(c, sum[i], sq[i], m[i]);
    }
    return;
  }
  parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    const ChannelPasses p = channel_passes(x, x_dtype, d, c, count);
    finish(c, p.sum, p.sq_dev, p.mean);
  });
}

void batch_norm_backward_reduce(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                                BatchNormDims d, const float* mean, double* sum_dy,
                                double* sum_dy_xmu) {
  const char* op = "batch_norm_backward_reduce";
  detail::check_batch_norm_args(op, d, 0.0f, false);
  check_dtypes(op, {x_dtype, dy_dtype});
  log_simd(op, dtype_label(x_dtype, dy_dtype));
  if (d.s < kMinRow) {
    return backward_sums_cols(x, x_dtype, dy, dy_dtype, nullptr, d, mean, sum_dy, sum_dy_xmu);
  }
  parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    double a = 0.0, b = 0.0;
    channel_backward_sums(x, x_dtype, ChannelRows::of(dy, dy_dtype, d, c), nullptr, d, c, mean[c],
                          &a, &b);
    sum_dy[c] = a;
    sum_dy_xmu[c] = b;
  });
}

void batch_norm_backward_elemt(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                               BatchNormDims d, const float* mean, const float* var, float eps,
                               const float* weight, const double* sum_dy,
                               const double* sum_dy_xmu, double count, void* dx, DType dx_dtype) {
  const char* op = "batch_norm_backward_elemt";
  detail::check_batch_norm_args(op, d, eps, false);
  check_dtypes(op, {x_dtype, dy_dtype, dx_dtype});
  log_simd(op, dtype_label(x_dtype, dx_dtype));
  auto coefs = [&](std::int64_t c) {
    return batch_norm_grad_coefs(var[c], eps, weight != nullptr ? weight[c] : 1.0f, sum_dy[c],
                                 sum_dy_xmu[c], count, true);
  };
  if (d.s < kMinRow) {
    const std::int64_t cols = d.c * d.s;
    std::vector<float> k1(static_cast<std::size_t>(d.c)), k2(k1.size()), k3(k1.size());
    for (std::int64_t c = 0; c < d.c; ++c) {
      const BatchNormGradCoefs k = coefs(c);
      const auto i = static_cast<std::size_t>(c);
      k1[i] = k.k1;
      k2[i] = k.k2;
      k3[i] = k.k3;
    }
    const std::vector<float> mean_col = expand(mean, d), k1c = expand(k1.data(), d),
                             k2c = expand(k2.data(), d), k3c = expand(k3.data(), d);
    over_row_blocks(d.n, cols, [&](std::int64_t n0, std::int64_t nrows) {
      simd::cols_backward_dx(at(x, x_dtype, n0 * cols), x_dtype, at(dy, dy_dtype, n0 * cols),
                             dy_dtype, nullptr, nrows, cols, cols, mean_col.data(), k1c.data(),
                             k2c.data(), k3c.data(), at(dx, dx_dtype, n0 * cols), dx_dtype);
    });
    return;
  }
  parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    const auto [k1, k2, k3] = coefs(c);
    simd::rows_backward_dx(channel_of(x, x_dtype, d, c), channel_of(dy, dy_dtype, d, c), nullptr,
                           {d.n, d.s}, mean[c], k1, k2, k3, channel_of(dx, dx_dtype, d, c));
  });
}

void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype, const void* residual, bool relu) {
  const char* op = "batch_norm";
  detail::check_batch_norm_args(op, d, eps, training);
  check_dtypes(op, {x_dtype, y_dtype});
  log_simd(op, dtype_label(x_dtype, y_dtype));
  if (d.s < kMinRow) {
    return batch_norm_forward_cols(x, x_dtype, d, weight, bias, eps, training, mean, var, y,
                                   y_dtype, residual, relu);
  }
  const double count = static_cast<double>(d.n * d.s);
  parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    if (training) {
      const ChannelPasses p = channel_passes(x, x_dtype, d, c, count);
      mean[c] = p.mean;
      var[c] = static_cast<float>(p.sq_dev / count);
    }
    const float scale = norm_invstd(var[c], eps) * (weight != nullptr ? weight[c] : 1.0f);
    const float shift = bias != nullptr ? bias[c] : 0.0f;
    // A lone ReLU is fused into the pass; a residual add (then the ReLU) follows row by row.
    simd::rows_affine(channel_of(x, x_dtype, d, c), {d.n, d.s}, mean[c], scale, shift,
                      relu && residual == nullptr, channel_of(y, y_dtype, d, c));
    if (residual != nullptr) {
      for (std::int64_t n = 0; n < d.n; ++n) {
        epilogue_run(y, y_dtype, residual, relu, (n * d.c + c) * d.s, d.s);
      }
    }
  });
}

void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias, const void* relu_y, void* dresidual) {
  const char* op = "batch_norm_backward";
  detail::check_batch_norm_args(op, d, eps, training);
  check_dtypes(op, {x_dtype, dy_dtype, dx_dtype});
  log_simd(op, dtype_label(x_dtype, dx_dtype));
  const bool epilogue = relu_y != nullptr || dresidual != nullptr;
  const std::size_t dy_size = size_of(dy_dtype);
  if (d.s < kMinRow) {
    // Per-column path: a lone ReLU's mask is read as dy is (no pass of its own); with a
    // residual, the epilogue's gradient is written whole first into dresidual, where it goes
    // anyway, and batch norm's backward reads it as its dy.
    if (dresidual == nullptr) {
      return batch_norm_backward_cols(x, x_dtype, dy, dy_dtype, relu_y, d, mean, var, eps, weight,
                                      training, dx, dx_dtype, dweight, dbias);
    }
    const std::int64_t cols = d.c * d.s;
    over_row_blocks(d.n, cols, [&](std::int64_t n0, std::int64_t nrows) {
      epilogue_grad_run(relu_y, dy, dy_dtype, n0 * cols, nrows * cols, dresidual, n0 * cols);
    });
    return batch_norm_backward_cols(x, x_dtype, dresidual, dy_dtype, nullptr, d, mean, var, eps,
                                    weight, training, dx, dx_dtype, dweight, dbias);
  }
  const double count = static_cast<double>(d.n * d.s);
  parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    const float m = mean[c];
    // The channel's gradient rows: dy as it is (through the ReLU as it is read, when the
    // ReLU's gradient is not wanted apart), or through the epilogue into dresidual (its own
    // layout) or into this thread's scratch (n rows of s, read twice below from cache).
    ChannelRows g = ChannelRows::of(dy, dy_dtype, d, c);
    const void* mask = dresidual == nullptr ? relu_y : nullptr;
    if (epilogue && mask == nullptr) {
      void* out = dresidual;
      ChannelRows rows = ChannelRows::of(dresidual, dy_dtype, d, c);
      if (out == nullptr) {
        out = grad_scratch(static_cast<std::size_t>(d.n * d.s) * dy_size);
        rows = {out, dy_dtype, 0, d.s};
      }
      for (std::int64_t n = 0; n < d.n; ++n) {
        epilogue_grad_run(relu_y, dy, dy_dtype, (n * d.c + c) * d.s, d.s, out,
                          rows.first + n * rows.stride);
      }
      g = rows;
    }
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    channel_backward_sums(x, x_dtype, g, mask, d, c, m, &sum_dy, &sum_dy_xmu);
    const float invstd = norm_invstd(var[c], eps);
    if (dweight != nullptr) dweight[c] = static_cast<float>(sum_dy_xmu) * invstd;
    if (dbias != nullptr) dbias[c] = static_cast<float>(sum_dy);
    if (dx == nullptr) return;
    const auto [k1, k2, k3] = batch_norm_grad_coefs(
        var[c], eps, weight != nullptr ? weight[c] : 1.0f, sum_dy, sum_dy_xmu, count, training);
    simd::rows_backward_dx(channel_of(x, x_dtype, d, c), g.rows(),
                           mask == nullptr ? nullptr : cpu::at(mask, dy_dtype, g.first), {d.n, d.s},
                           m, k1, k2, k3, channel_of(dx, dx_dtype, d, c));
  });
}

namespace {

/// Layer norm of row r of x (cols values): the statistics in double as the reference sums
/// them, then one SIMD pass for y. weight and bias are both set or both null.
void layer_norm_row(const void* x, DType x_dtype, std::int64_t r, std::int64_t cols,
                    const float* weight, const float* bias, float eps, void* y, DType y_dtype,
                    float* mean, float* rstd) {
  const void* xr = at(x, x_dtype, r * cols);
  float m = 0.0f, v = 0.0f;  // the reference's statistics of an empty row
  if (cols > 0) {
    const simd::Rows row{xr, x_dtype, cols};
    m = static_cast<float>(simd::rows_sum(row, {1, cols}) / static_cast<double>(cols));
    v = static_cast<float>(simd::rows_sq_dev_sum(row, {1, cols}, m) / static_cast<double>(cols));
  }
  const float rs = norm_invstd(v, eps);
  mean[r] = m;
  rstd[r] = rs;
  if (weight != nullptr) {
    simd::ln_row_affine(xr, x_dtype, cols, m, rs, weight, bias, at(y, y_dtype, r * cols), y_dtype);
  } else {
    simd::rows_affine({xr, x_dtype, cols}, {1, cols}, m, rs, 0.0f, false,
                      {at(y, y_dtype, r * cols), y_dtype, cols});
  }
}

/// A missing weight or bias (but not both) is read as ones / zeros: fills `ones` or `zeros`
/// and points weight or bias at it.
void complete_affine(std::int64_t cols, const float*& weight, const float*& bias,
                     std::vector<float>& ones, std::vector<float>& zeros) {
  if (weight == nullptr && bias == nullptr) return;
  if (weight == nullptr) ones.assign(static_cast<std::size_t>(cols), 1.0f), weight = ones.data();
  if (bias == nullptr) zeros.assign(static_cast<std::size_t>(cols), 0.0f), bias = zeros.data();
}

}  // namespace

void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd) {
  const char* op = "layer_norm";
  detail::check_layer_norm_args(op, rows, cols, eps);
  check_dtypes(op, {x_dtype, y_dtype});
  log_simd(op, dtype_label(x_dtype, y_dtype));
  std::vector<float> ones, zeros;
  complete_affine(cols, weight, bias, ones, zeros);
  parallel_for(rows, parallel_over(rows * cols, rows), [&](std::int64_t r) {
    layer_norm_row(x, x_dtype, r, cols, weight, bias, eps, y, y_dtype, mean, rstd);
  });
}

void add_layer_norm_forward(const void* x, DType x_dtype, const void* delta, DType delta_dtype,
                            std::int64_t rows, std::int64_t cols, const float* weight,
                            const float* bias, float eps, void* sum, DType sum_dtype, void* y,
                            DType y_dtype, float* mean, float* rstd) {
  const char* op = "add_layer_norm";
  detail::check_layer_norm_args(op, rows, cols, eps);
  check_dtypes(op, {x_dtype, delta_dtype, sum_dtype, y_dtype});
  log_simd(op, dtype_label(x_dtype, y_dtype));
  std::vector<float> ones, zeros;
  complete_affine(cols, weight, bias, ones, zeros);
  // Each row is added and then normalised while it is still in L1: the norm's two statistics
  // passes and its output pass read the sum from cache, not from memory.
  parallel_for(rows, parallel_over(rows * cols, rows), [&](std::int64_t r) {
    const std::int64_t base = r * cols;
    cpu::binary_row(BinaryOp::add, at(x, x_dtype, base), x_dtype, at(delta, delta_dtype, base),
                    delta_dtype, cpu::ScalarSide::none, 0.0f, at(sum, sum_dtype, base), sum_dtype,
                    cols);
    layer_norm_row(sum, sum_dtype, r, cols, weight, bias, eps, y, y_dtype, mean, rstd);
  });
}

void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  const char* op = "layer_norm_backward";
  detail::check_layer_norm_args(op, rows, cols, 0.0f);
  check_dtypes(op, {x_dtype, dy_dtype, dx_dtype});
  log_simd(op, dtype_label(x_dtype, dx_dtype));
  std::vector<float> ones;
  if (weight == nullptr) ones.assign(static_cast<std::size_t>(cols), 1.0f), weight = ones.data();
  if (dx != nullptr) {
    parallel_for(rows, parallel_over(rows * cols, rows), [&](std::int64_t r) {
      const void* xr = at(x, x_dtype, r * cols);
      const void* dyr = at(dy, dy_dtype, r * cols);
      double sum_g = 0.0, sum_g_xhat = 0.0;
      for (std::int64_t i = 0; i < cols; i += simd::kRun) {
        float a = 0.0f, b = 0.0f;
        simd::ln_row_backward_sums(at(xr, x_dtype, i), x_dtype, at(dyr, dy_dtype, i), dy_dtype,
                                   weight + i, std::min(simd::kRun, cols - i), mean[r], rstd[r], &a, &b);
        sum_g += a;
        sum_g_xhat += b;
      }
      const float a = static_cast<float>(sum_g / static_cast<double>(cols));
      const float b = static_cast<float>(sum_g_xhat / static_cast<double>(cols));
      simd::ln_row_backward_dx(xr, x_dtype, dyr, dy_dtype, weight, cols, mean[r], rstd[r], a, b,
                               at(dx, dx_dtype, r * cols), dx_dtype);
    });
  }
  if (dweight == nullptr && dbias == nullptr) return;
  std::vector<double> sw(static_cast<std::size_t>(cols)), sb(sw.size());
  column_sums(rows, cols, sw.data(), sb.data(),
              [&](std::int64_t r0, std::int64_t nrows, std::int64_t j0, std::int64_t len, float* a0,
                  float* a1) {
                for (std::int64_t r = r0; r < r0 + nrows; ++r) {  // mean and rstd per row
                  simd::ln_cols_acc(at(x, x_dtype, r * cols + j0), x_dtype,
                                    at(dy, dy_dtype, r * cols + j0), dy_dtype, len, mean[r],
                                    rstd[r], a0, a1);
                }
              });
  for (std::int64_t j = 0; j < cols; ++j) {
    if (dweight != nullptr) dweight[j] = static_cast<float>(sw[static_cast<std::size_t>(j)]);
    if (dbias != nullptr) dbias[j] = static_cast<float>(sb[static_cast<std::size_t>(j)]);
  }
}
}  // namespace cpu

}  // namespace mixprec::kernels
