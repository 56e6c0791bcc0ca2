// Reference row-wise softmax, log-softmax and cross-entropy (separate and fused): scalar f32
// loops, the spec.
// Every row subtracts its max before exponentiating (log-sum-exp), so no finite input
// overflows; a row containing +Inf or only -Inf gives NaN, as in torch.
#include <cmath>
#include <vector>

#include "kernels/spec/softmax_checks.h"
#include "kernels/softmax.h"
#include "kernels/spec/softmax_math.h"

namespace mixprec::kernels {

namespace ref {
namespace {

void check_rows(const char* op, std::int64_t rows, std::int64_t cols) {
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
}

/// The f32 values of one row.
template <class T>
std::vector<float> load_row(const T* p, std::int64_t cols) {
  std::vector<float> v(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) v[c] = static_cast<float>(p[c]);
  return v;
}

/// NaN-propagating row max (a NaN makes the whole row NaN, which is what we want).
float row_max(const std::vector<float>& x) {
  float m = -INFINITY;
  for (float v : x) m = softmax_math::row_max_step(m, v);
  return m;
}

}  // namespace

void softmax(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
             DType out_dtype, bool log) {
  check_rows(log ? "log_softmax" : "softmax", rows, cols);
  dispatch(in_dtype, out_dtype, [&](auto ti, auto to) {
    using TI = decltype(ti);
    using TO = decltype(to);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<float> x = load_row(static_cast<const TI*>(in) + r * cols, cols);
      TO* y = static_cast<TO*>(out) + r * cols;
      const float m = row_max(x);
      float sum = 0.0f;
      for (float v : x) sum += std::exp(v - m);
      if (log) {
        const float lse = std::log(sum);
        for (std::int64_t c = 0; c < cols; ++c) {
          y[c] = TO(softmax_math::log_softmax_value(x[c], m, lse));
        }
      } else {
        const float inv = 1.0f / sum;
        for (std::int64_t c = 0; c < cols; ++c) {
          y[c] = TO(softmax_math::softmax_value(x[c], m, inv));
        }
      }
    }
  });
}

void softmax_backward(const void* y, DType y_dtype, const void* dy, DType dy_dtype,
                      std::int64_t rows, std::int64_t cols, void* dx, DType dx_dtype, bool log) {
  check_rows(log ? "log_softmax_backward" : "softmax_backward", rows, cols);
  dispatch(y_dtype, dy_dtype, dx_dtype, [&](auto ty, auto tg, auto to) {
    using TY = decltype(ty);
    using TG = decltype(tg);
    using TO = decltype(to);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<float> yr = load_row(static_cast<const TY*>(y) + r * cols, cols);
      const std::vector<float> g = load_row(static_cast<const TG*>(dy) + r * cols, cols);
      TO* d = static_cast<TO*>(dx) + r * cols;
      float s = 0.0f;
      if (log) {
        for (float v : g) s += v;  // sum(dy)
        for (std::int64_t c = 0; c < cols; ++c) {
          d[c] = TO(softmax_math::log_softmax_grad(g[c], yr[c], s));
        }
      } else {
        for (std::int64_t c = 0; c < cols; ++c) s += g[c] * yr[c];  // sum(dy * y)
        for (std::int64_t c = 0; c < cols; ++c) {
          d[c] = TO(softmax_math::softmax_grad(g[c], yr[c], s));
        }
      }
    }
  });
}

namespace {

/// One row of the cross-entropy kernels: its f32 values, max and sum of exponentials, loaded
/// whole before anything is written (so dlogits may alias the logits).
struct CrossEntropyRow {
  std::vector<float> x;
  float m, sum;
  template <class T>
  CrossEntropyRow(const T* p, std::int64_t cols) : x(load_row(p, cols)), m(row_max(x)), sum(0.0f) {
    for (float v : x) sum += std::exp(v - m);
  }
  /// The row's loss against target t with smoothing s.
  float loss(std::int64_t t, float s) const {
    const float lse = std::log(sum);
    float sum_logp = 0.0f;
    for (float v : x) sum_logp += softmax_math::log_softmax_value(v, m, lse);
    const float logp_t = softmax_math::log_softmax_value(x[t], m, lse);
    return softmax_math::cross_entropy_loss(logp_t, sum_logp, s, static_cast<std::int64_t>(x.size()));
  }
  /// d[c] = g * (softmax - q) for every class, q smoothed by s (off-target mass q_off).
  template <class TO>
  void grad(std::int64_t t, float s, float q_off, float g, TO* d) const {
    const float inv = 1.0f / sum;
    for (std::size_t c = 0; c < x.size(); ++c) {
      d[c] = TO(softmax_math::cross_entropy_grad(g, x[c], m, inv,
                                                 static_cast<std::int64_t>(c) == t, q_off, s));
    }
  }
};

}  // namespace

void cross_entropy(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing, float* loss_per_row) {
  detail::check_cross_entropy_args("cross_entropy", rows, cols, targets, label_smoothing);
  dispatch(dtype, [&](auto t) {
    using T = decltype(t);
    for (std::int64_t r = 0; r < rows; ++r) {
      const CrossEntropyRow row(static_cast<const T*>(logits) + r * cols, cols);
      loss_per_row[r] = row.loss(targets[r], label_smoothing);
    }
  });
}

namespace {
/// Calls f(r, row, d) for each row r of the logits in order, with d (TO*) its row of dlogits.
template <class F>
void for_each_grad_row(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                       void* dlogits, DType dlogits_dtype, F f) {
  dispatch(dtype, dlogits_dtype, [&](auto t, auto to) {
    using T = decltype(t);
    using TO = decltype(to);
    for (std::int64_t r = 0; r < rows; ++r) {
      f(r, CrossEntropyRow(static_cast<const T*>(logits) + r * cols, cols),
        static_cast<TO*>(dlogits) + r * cols);
    }
  });
}
}  // namespace

void cross_entropy_backward(const void* logits, DType dtype, std::int64_t rows,
                            std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                            const float* grad_per_row, void* dlogits, DType dlogits_dtype) {
  detail::check_cross_entropy_args("cross_entropy_backward", rows, cols, targets,
                                   label_smoothing);
  const float s = label_smoothing;
  const float q_off = softmax_math::cross_entropy_off_mass(s, cols);
  for_each_grad_row(logits, dtype, rows, cols, dlogits, dlogits_dtype,
                    [&](std::int64_t r, const CrossEntropyRow& row, auto* d) {
                      row.grad(targets[r], s, q_off, grad_per_row[r], d);
                    });
}

void cross_entropy_fused(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                         const std::int64_t* targets, float label_smoothing,
                         const float* grad_per_row, float* loss_per_row, void* dlogits,
                         DType dlogits_dtype) {
  detail::check_cross_entropy_args("cross_entropy_fused", rows, cols, targets, label_smoothing);
  detail::check_cross_entropy_alias("cross_entropy_fused", logits, dtype, dlogits, dlogits_dtype,
                                    rows, cols, grad_per_row, loss_per_row);
  const float s = label_smoothing;
  const float q_off = softmax_math::cross_entropy_off_mass(s, cols);
  for_each_grad_row(logits, dtype, rows, cols, dlogits, dlogits_dtype,
                    [&](std::int64_t r, const CrossEntropyRow& row, auto* d) {
                      const float g = grad_per_row[r];  // before loss_per_row[r], which may be it
                      loss_per_row[r] = row.loss(targets[r], s);
                      row.grad(targets[r], s, q_off, g, d);
                    });
}

void rescale_unless_equal(void* x, DType dtype, std::int64_t n, const float* num,
                          const float* den) {
  MIXPREC_CHECK(n >= 0, ShapeError, "rescale_unless_equal", "negative extent " << n);
  if (softmax_math::same_bits(*num, *den)) return;
  const float ratio = *num / *den;
  dispatch(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(x);
    for (std::int64_t i = 0; i < n; ++i) p[i] = T(static_cast<float>(p[i]) * ratio);
  });
}

}  // namespace ref
}  // namespace mixprec::kernels
