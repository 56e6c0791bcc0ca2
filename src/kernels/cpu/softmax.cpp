// Dispatching softmax / cross-entropy: rows go to the AVX-512 row kernels, split across threads
// by rows (each row on one thread, so results do not depend on the thread count); dtype pairs
// the vector code does not cover go to the reference.
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/softmax_avx512.h"
#include "kernels/ref/softmax_checks.h"
#include "kernels/softmax.h"

namespace mixprec::kernels {
namespace {

int code(DType t) { return static_cast<int>(t); }

/// Runs body(row, scratch) over rows, with `scratch` a per-thread f32 buffer of cols floats.
template <class Body>
void for_rows(std::int64_t rows, std::int64_t cols, bool need_scratch, Body&& body) {
  const bool parallel = rows * cols >= cpu::kParallelMinWork && rows > 1;
  const int threads = parallel ? omp_get_max_threads() : 1;
  std::vector<float> scratch(need_scratch ? static_cast<std::size_t>(threads * cols) : 0);
  if (!parallel) {
    for (std::int64_t r = 0; r < rows; ++r) body(r, scratch.data());
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    float* ws = need_scratch ? scratch.data() + omp_get_thread_num() * cols : nullptr;
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) body(r, ws);
  }
}

void check_extent(const char* op, std::int64_t rows, std::int64_t cols) {
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
}

}  // namespace

namespace cpu {
void softmax(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
             DType out_dtype, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  check_extent(op, rows, cols);
  std::string why_not = cpu::avx512_unavailable_reason();
  if (why_not.empty() && !cpu::avx512_dtype_pair(in_dtype, out_dtype)) {
    why_not = "avx512: dtype pair not vectorised";
  }
  cpu::log_impl(op, cpu::dtype_label(in_dtype, out_dtype), why_not.empty(), why_not);
  if (!why_not.empty()) return ref::softmax(in, in_dtype, rows, cols, out, out_dtype, log);
  for_rows(rows, cols, !log, [&](std::int64_t r, float* ws) {
    avx512::softmax_row(cpu::at(in, in_dtype, r * cols), code(in_dtype),
                        cpu::at(out, out_dtype, r * cols), code(out_dtype), cols, log, ws);
  });
}

void softmax_backward(const void* y, DType y_dtype, const void* dy, DType dy_dtype,
                      std::int64_t rows, std::int64_t cols, void* dx, DType dx_dtype, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  check_extent(op, rows, cols);
  std::string why_not = cpu::avx512_unavailable_reason();
  if (why_not.empty() && (y_dtype != dy_dtype || !cpu::avx512_dtype_pair(dy_dtype, dx_dtype))) {
    why_not = "avx512: dtype combination not vectorised";
  }
  cpu::log_impl(op, cpu::dtype_label(dy_dtype, dx_dtype), why_not.empty(), why_not);
  if (!why_not.empty()) {
    return ref::softmax_backward(y, y_dtype, dy, dy_dtype, rows, cols, dx, dx_dtype, log);
  }
  for_rows(rows, cols, false, [&](std::int64_t r, float*) {
    avx512::softmax_backward_row(cpu::at(y, y_dtype, r * cols), cpu::at(dy, dy_dtype, r * cols),
                                 code(y_dtype), cpu::at(dx, dx_dtype, r * cols), code(dx_dtype),
                                 cols, log);
  });
}

void cross_entropy(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing, float* loss_per_row) {
  detail::check_cross_entropy_args("cross_entropy", rows, cols, targets, label_smoothing);
  require_compute_dtype("cross_entropy", dtype);  // the vector kernel knows dtype codes 0-2 only
  const std::string why_not = cpu::avx512_unavailable_reason();
  cpu::log_impl("cross_entropy", name(dtype), why_not.empty(), why_not);
  if (!why_not.empty()) {
    return ref::cross_entropy(logits, dtype, rows, cols, targets, label_smoothing, loss_per_row);
  }
  const float s = label_smoothing;
  for_rows(rows, cols, false, [&](std::int64_t r, float*) {
    const void* x = cpu::at(logits, dtype, r * cols);
    float m = 0.0f, sum_exp = 0.0f, sum_shifted = 0.0f;
    avx512::cross_entropy_row_stats(x, code(dtype), cols, &m, &sum_exp, &sum_shifted);
    // The reference's formula with sum_c logp[c] = sum_c (x[c] - m) - cols * lse: every
    // logp[c] <= 0, so regrouping the sum does not cancel.
    const float lse = std::log(sum_exp);
    const float logp_t = (cpu::load_f32(x, dtype, targets[r]) - m) - lse;
    const float sum_logp = sum_shifted - static_cast<float>(cols) * lse;
    loss_per_row[r] = -(1.0f - s) * logp_t - (s / static_cast<float>(cols)) * sum_logp;
  });
}

void cross_entropy_backward(const void* logits, DType dtype, std::int64_t rows,
                            std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                            const float* grad_per_row, void* dlogits, DType dlogits_dtype) {
  detail::check_cross_entropy_args("cross_entropy_backward", rows, cols, targets,
                                   label_smoothing);
  std::string why_not = cpu::avx512_unavailable_reason();
  if (why_not.empty() && !cpu::avx512_dtype_pair(dtype, dlogits_dtype)) {
    why_not = "avx512: dtype pair not vectorised";
  }
  cpu::log_impl("cross_entropy_backward", cpu::dtype_label(dtype, dlogits_dtype),
                why_not.empty(), why_not);
  if (!why_not.empty()) {
    return ref::cross_entropy_backward(logits, dtype, rows, cols, targets, label_smoothing,
                                       grad_per_row, dlogits, dlogits_dtype);
  }
  for_rows(rows, cols, true, [&](std::int64_t r, float* ws) {
    avx512::cross_entropy_backward_row(cpu::at(logits, dtype, r * cols), code(dtype), cols,
                                       targets[r], label_smoothing, grad_per_row[r],
                                       cpu::at(dlogits, dlogits_dtype, r * cols),
                                       code(dlogits_dtype), ws);
  });
}
}  // namespace cpu

}  // namespace mixprec::kernels
