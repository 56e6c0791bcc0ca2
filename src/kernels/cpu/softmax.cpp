// Dispatching softmax / log-softmax / cross-entropy, forward and backward; the vector row
// kernels are in softmax_simd.cpp (Highway, every target). A row is processed in fixed chunks
// of kColChunk elements whose partial sums are combined in chunk order, and its max is exact,
// so the result depends only on the shape, never on the thread count. Many rows: each row runs
// on one thread, its chunks back to back (the row stays in cache between the passes). Few long
// rows: every pass is split over (row, chunk) tasks so all threads work. Rows whose max is NaN
// or infinite come out NaN, as in the reference (their exps are NaN there).
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/softmax_simd.h"
#include "kernels/spec/softmax_checks.h"
#include "kernels/spec/softmax_math.h"
#include "kernels/elementwise.h"
#include "kernels/softmax.h"

namespace mixprec::kernels {
namespace {

constexpr std::int64_t kColChunk = 16384;  // elements per partial sum of a row
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// One pass over a row: chunk(r, c, scratch) for each chunk c, then row(r) to combine them.
/// scratch is a per-thread f32 buffer of cols floats when the whole row runs on this thread,
/// else null (the pass was split over threads).
template <class Chunk, class Row>
struct Pass {
  Chunk chunk;
  Row row;
};
template <class Chunk, class Row>
Pass<Chunk, Row> pass(Chunk c, Row r) {
  return {c, r};
}
const auto kNoRowStep = [](std::int64_t) {};

/// Runs the passes of a row algorithm over [rows, cols] (see the file comment).
template <class... P>
void run_rows(std::int64_t rows, std::int64_t cols, const P&... passes) {
  const std::int64_t chunks = cols <= kColChunk ? 1 : (cols + kColChunk - 1) / kColChunk;
  const bool parallel = rows * cols >= cpu::kParallelMinWork;
  const bool split = parallel && chunks > 1 && rows < 2 * omp_get_max_threads();
  if (!split) {
    cpu::parallel_for(rows, parallel, [&](std::int64_t r) {
      static thread_local std::vector<float> scratch;
      if (scratch.size() < static_cast<std::size_t>(cols)) scratch.resize(cols);
      const auto one = [&](const auto& p) {
        for (std::int64_t c = 0; c < chunks; ++c) p.chunk(r, c, scratch.data());
        p.row(r);
      };
      (one(passes), ...);
    });
    return;
  }
  const auto one = [&](const auto& p) {
    cpu::parallel_for(rows * chunks, true, [&](std::int64_t t) {
      p.chunk(t / chunks, t % chunks, static_cast<float*>(nullptr));
    });
    for (std::int64_t r = 0; r < rows; ++r) p.row(r);
  };
  (one(passes), ...);
}

/// Chunk c of a row: its first column and length.
struct Span {
  std::int64_t begin, size;
};
Span span(std::int64_t cols, std::int64_t c) {
  const std::int64_t begin = c * kColChunk;
  return {begin, std::min(kColChunk, cols - begin)};
}

/// Writes NaN over n elements (a row whose max is not finite).
void fill_nan(void* p, DType dt, std::int64_t n) {
  dispatch(dt, [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < n; ++i) static_cast<T*>(p)[i] = T(kNaN);
  });
}

/// Row maxima (pass 1 of the forward kernels): max of the chunk maxima (exact in any order).
struct RowMax {
  const void* x;
  DType dt;
  std::int64_t cols, chunks;
  std::vector<float> part, m;
  RowMax(const void* x_, DType dt_, std::int64_t rows, std::int64_t cols_)
      : x(x_), dt(dt_), cols(cols_), chunks(cols <= kColChunk ? 1 : (cols + kColChunk - 1) / kColChunk),
        part(static_cast<std::size_t>(rows * chunks)), m(static_cast<std::size_t>(rows)) {}
  auto as_pass() {
    return pass(
        [this](std::int64_t r, std::int64_t c, float*) {
          const Span s = span(cols, c);
          part[r * chunks + c] = cpu::simd_row_max(dt, cpu::at(x, dt, r * cols + s.begin), s.size);
        },
        [this](std::int64_t r) {
          float v = part[r * chunks];
          for (std::int64_t c = 1; c < chunks; ++c) {
            const float p = part[r * chunks + c];
            v = (v != v) ? v : (p != p || p > v) ? p : v;
          }
          m[r] = v;
        });
  }
  bool finite(std::int64_t r) const { return std::isfinite(m[r]); }
};

/// Sums the chunk partials of row r in chunk order.
float combine(const std::vector<float>& part, std::int64_t r, std::int64_t chunks) {
  float s = part[r * chunks];
  for (std::int64_t c = 1; c < chunks; ++c) s += part[r * chunks + c];
  return s;
}

std::int64_t chunk_count(std::int64_t cols) {
  return cols <= kColChunk ? 1 : (cols + kColChunk - 1) / kColChunk;
}

}  // namespace

namespace cpu {
void softmax(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
             DType out_dtype, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
  const std::string label = dtype_label(in_dtype, out_dtype);
  require_compute_dtype(op, in_dtype);  // fp8 calls run the reference
  require_compute_dtype(op, out_dtype);
  log_simd(op, label);
  if (rows == 0 || cols == 0) return;
  const std::int64_t chunks = chunk_count(cols);
  RowMax mx(in, in_dtype, rows, cols);
  std::vector<float> part(static_cast<std::size_t>(rows * chunks)), total(static_cast<std::size_t>(rows));
  // f32 output holds the exps until they are scaled; other dtypes use the thread's scratch row
  // (or recompute the exps when a row is split over threads).
  const bool exps_in_out = out_dtype == DType::f32 && !log;
  run_rows(rows, cols, mx.as_pass(),
           pass(
               [&](std::int64_t r, std::int64_t c, float* scratch) {
                 if (!mx.finite(r)) return;
                 const Span s = span(cols, c);
                 float* e = nullptr;
                 if (!log) {
                   e = exps_in_out ? static_cast<float*>(out) + r * cols + s.begin
                       : scratch   ? scratch + s.begin
                                   : nullptr;
                 }
                 simd_exp_stats(in_dtype, at(in, in_dtype, r * cols + s.begin), s.size, mx.m[r],
                                &part[r * chunks + c], nullptr, e);
               },
               [&](std::int64_t r) {
                 if (mx.finite(r)) total[r] = combine(part, r, chunks);
               }),
           pass(
               [&](std::int64_t r, std::int64_t c, float* scratch) {
                 const Span s = span(cols, c);
                 const void* x = at(in, in_dtype, r * cols + s.begin);
                 void* y = at(out, out_dtype, r * cols + s.begin);
                 if (!mx.finite(r)) return fill_nan(y, out_dtype, s.size);
                 if (log) {
                   return simd_log_softmax_out(in_dtype, x, s.size, mx.m[r], std::log(total[r]),
                                               out_dtype, y);
                 }
                 const float* e = exps_in_out ? static_cast<const float*>(y)
                                  : scratch   ? scratch + s.begin
                                              : nullptr;
                 simd_softmax_out(in_dtype, x, s.size, mx.m[r], 1.0f / total[r], e, out_dtype, y);
               },
               kNoRowStep));
}

void softmax_backward(const void* y, DType y_dtype, const void* dy, DType dy_dtype,
                      std::int64_t rows, std::int64_t cols, void* dx, DType dx_dtype, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
  std::string label = dtype_label(dy_dtype, dx_dtype);
  if (y_dtype != dy_dtype) label = std::string(name(y_dtype)) + "," + label;
  for (DType t : {y_dtype, dy_dtype, dx_dtype}) require_compute_dtype(op, t);
  log_simd(op, label);
  if (rows == 0 || cols == 0) return;
  const std::int64_t chunks = chunk_count(cols);
  std::vector<float> part(static_cast<std::size_t>(rows * chunks)), total(static_cast<std::size_t>(rows));
  run_rows(rows, cols,
           pass(
               [&](std::int64_t r, std::int64_t c, float*) {
                 const Span s = span(cols, c);
                 // softmax: sum dy * y; log-softmax: sum dy.
                 part[r * chunks + c] =
                     simd_back_dot(y_dtype, log ? nullptr : at(y, y_dtype, r * cols + s.begin),
                                   dy_dtype, at(dy, dy_dtype, r * cols + s.begin), s.size);
               },
               [&](std::int64_t r) { total[r] = combine(part, r, chunks); }),
           pass(
               [&](std::int64_t r, std::int64_t c, float*) {
                 const Span s = span(cols, c);
                 const std::int64_t o = r * cols + s.begin;
                 simd_back_out(y_dtype, at(y, y_dtype, o), dy_dtype, at(dy, dy_dtype, o), s.size,
                               total[r], log, dx_dtype, at(dx, dx_dtype, o));
               },
               kNoRowStep));
}

namespace {
/// The chunk pass every cross-entropy kernel starts with: for each chunk c of a finite row r,
/// the sum of e^(x - max) into exp_part[r * chunks + c] and, if shift_part is not null, the sum
/// of x - max into shift_part[r * chunks + c].
auto exp_stats_chunk(const RowMax& mx, const void* logits, DType dtype, std::int64_t cols,
                     std::int64_t chunks, float* exp_part, float* shift_part) {
  return [=, &mx](std::int64_t r, std::int64_t c, float*) {
    if (!mx.finite(r)) return;
    const Span sp = span(cols, c);
    const std::int64_t k = r * chunks + c;
    simd_exp_stats(dtype, at(logits, dtype, r * cols + sp.begin), sp.size, mx.m[r],
                   exp_part + k, shift_part != nullptr ? shift_part + k : nullptr, nullptr);
  };
}

/// Row r's loss from its chunk partials (NaN for a row whose max is not finite). Reads the
/// target's logit, so in place it runs before the row's gradient pass.
float row_loss(const RowMax& mx, const void* logits, DType dtype, std::int64_t cols,
               std::int64_t chunks, const std::vector<float>& exp_part,
               const std::vector<float>& shift_part, std::int64_t r, std::int64_t target,
               float s) {
  if (!mx.finite(r)) return kNaN;
  // The reference's formula with sum_c logp[c] = sum_c (x[c] - m) - cols * lse: every
  // logp[c] <= 0, so regrouping the sum does not cancel.
  const float m = mx.m[r];
  const float lse = std::log(combine(exp_part, r, chunks));
  const float logp_t = (load_f32(logits, dtype, r * cols + target) - m) - lse;
  const float sum_logp = combine(shift_part, r, chunks) - static_cast<float>(cols) * lse;
  return -(1.0f - s) * logp_t - (s / static_cast<float>(cols)) * sum_logp;
}

/// The gradient pass: chunk c of row r gets g[r] * (softmax - q) from the row's max and
/// total[r] = sum e^(x - max) (NaN for a row whose max is not finite). The vector kernel loads
/// each vector before it stores it, so dlogits may be logits.
auto grad_chunk(const RowMax& mx, const void* logits, DType dtype, std::int64_t cols,
                const std::int64_t* targets, float s, const float* grad_per_row,
                const std::vector<float>& total, void* dlogits, DType dlogits_dtype) {
  const float q_off = s / static_cast<float>(cols);  // smoothed target mass off the label
  const float q_on = q_off + (1.0f - s);             // ... and at the label, as the reference
  return [=, &mx, &total](std::int64_t r, std::int64_t c, float*) {
    const Span sp = span(cols, c);
    void* d = at(dlogits, dlogits_dtype, r * cols + sp.begin);
    if (!mx.finite(r)) return fill_nan(d, dlogits_dtype, sp.size);
    const std::int64_t t = targets[r] - sp.begin;
    simd_cross_entropy_back_out(dtype, at(logits, dtype, r * cols + sp.begin), sp.size, mx.m[r],
                                1.0f / total[r], grad_per_row[r], q_off, q_on,
                                t >= 0 && t < sp.size ? t : -1, dlogits_dtype, d);
  };
}
}  // namespace

void cross_entropy(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing, float* loss_per_row) {
  detail::check_cross_entropy_args("cross_entropy", rows, cols, targets, label_smoothing);
  require_compute_dtype("cross_entropy", dtype);
  log_simd("cross_entropy", name(dtype));
  if (rows == 0) return;
  const std::int64_t chunks = chunk_count(cols);
  RowMax mx(logits, dtype, rows, cols);
  std::vector<float> exp_part(static_cast<std::size_t>(rows * chunks)), shift_part(exp_part.size());
  run_rows(rows, cols, mx.as_pass(),
           pass(exp_stats_chunk(mx, logits, dtype, cols, chunks, exp_part.data(), shift_part.data()),
               [&](std::int64_t r) {
                 loss_per_row[r] = row_loss(mx, logits, dtype, cols, chunks, exp_part, shift_part,
                                            r, targets[r], label_smoothing);
               }));
}

void cross_entropy_backward(const void* logits, DType dtype, std::int64_t rows,
                            std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                            const float* grad_per_row, void* dlogits, DType dlogits_dtype) {
  detail::check_cross_entropy_args("cross_entropy_backward", rows, cols, targets,
                                   label_smoothing);
  const std::string label = dtype_label(dtype, dlogits_dtype);
  require_compute_dtype("cross_entropy_backward", dtype);
  require_compute_dtype("cross_entropy_backward", dlogits_dtype);
  log_simd("cross_entropy_backward", label);
  if (rows == 0 || cols == 0) return;
  const std::int64_t chunks = chunk_count(cols);
  RowMax mx(logits, dtype, rows, cols);
  std::vector<float> part(static_cast<std::size_t>(rows * chunks)), total(static_cast<std::size_t>(rows));
  run_rows(rows, cols, mx.as_pass(),
           pass(exp_stats_chunk(mx, logits, dtype, cols, chunks, part.data(), nullptr),
               [&](std::int64_t r) {
                 if (mx.finite(r)) total[r] = combine(part, r, chunks);
               }),
           pass(grad_chunk(mx, logits, dtype, cols, targets, label_smoothing, grad_per_row, total,
                           dlogits, dlogits_dtype),
                kNoRowStep));
}

// The two kernels above in three passes instead of five: the max, the exp and shift sums
// (whose row step writes the loss and keeps the exp sum), the gradient. The sums are the same
// calls in the same order, so loss and gradient have the separate kernels' bits. In place, a
// row's target logit is read by the second pass's row step, which (split or not) runs before
// any chunk of the third pass writes that row.
void cross_entropy_fused(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                         const std::int64_t* targets, float label_smoothing,
                         const float* grad_per_row, float* loss_per_row, void* dlogits,
                         DType dlogits_dtype) {
  const char* op = "cross_entropy_fused";
  detail::check_cross_entropy_args(op, rows, cols, targets, label_smoothing);
  detail::check_cross_entropy_alias(op, logits, dtype, dlogits, dlogits_dtype, rows, cols,
                                    grad_per_row, loss_per_row);
  require_compute_dtype(op, dtype);
  require_compute_dtype(op, dlogits_dtype);
  log_simd(op, dtype_label(dtype, dlogits_dtype));
  if (rows == 0) return;
  const std::int64_t chunks = chunk_count(cols);
  RowMax mx(logits, dtype, rows, cols);
  std::vector<float> exp_part(static_cast<std::size_t>(rows * chunks)), shift_part(exp_part.size());
  std::vector<float> total(static_cast<std::size_t>(rows));
  // The gradients are read before any loss is written: loss_per_row may be grad_per_row.
  const std::vector<float> g(grad_per_row, grad_per_row + rows);
  run_rows(rows, cols, mx.as_pass(),
           pass(exp_stats_chunk(mx, logits, dtype, cols, chunks, exp_part.data(), shift_part.data()),
               [&](std::int64_t r) {
                 loss_per_row[r] = row_loss(mx, logits, dtype, cols, chunks, exp_part, shift_part,
                                            r, targets[r], label_smoothing);
                 if (mx.finite(r)) total[r] = combine(exp_part, r, chunks);
               }),
           pass(grad_chunk(mx, logits, dtype, cols, targets, label_smoothing, g.data(), total,
                           dlogits, dlogits_dtype),
                kNoRowStep));
}

// The cpu's affine kernel does the multiply: alpha * x rounded to f32, then + (-0), which
// changes no value (not even -0), then rounded once to the dtype: the reference's bits.
void rescale_unless_equal(void* x, DType dtype, std::int64_t n, const float* num,
                          const float* den) {
  MIXPREC_CHECK(n >= 0, ShapeError, "rescale_unless_equal", "negative extent " << n);
  if (softmax_math::same_bits(*num, *den)) return;
  log_simd("rescale_unless_equal", name(dtype));  // only when it rescales: a broken promise
  cpu::affine(x, dtype, x, dtype, n, *num / *den, -0.0f);
}
}  // namespace cpu

}  // namespace mixprec::kernels
