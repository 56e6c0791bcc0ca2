// Reference row-wise softmax, log-softmax and cross-entropy: scalar f32 loops, the spec.
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

void cross_entropy(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing, float* loss_per_row) {
  detail::check_cross_entropy_args("cross_entropy", rows, cols, targets, label_smoothing);
  const float s = label_smoothing;
  dispatch(dtype, [&](auto t) {
    using T = decltype(t);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<float> x = load_row(static_cast<const T*>(logits) + r * cols, cols);
      const float m = row_max(x);
      float sum = 0.0f;
      for (float v : x) sum += std::exp(v - m);
      const float lse = std::log(sum);
      float sum_logp = 0.0f;
      for (float v : x) sum_logp += softmax_math::log_softmax_value(v, m, lse);
      const float logp_t = softmax_math::log_softmax_value(x[targets[r]], m, lse);
      loss_per_row[r] = softmax_math::cross_entropy_loss(logp_t, sum_logp, s, cols);
    }
  });
}

void cross_entropy_backward(const void* logits, DType dtype, std::int64_t rows,
                            std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                            const float* grad_per_row, void* dlogits, DType dlogits_dtype) {
  detail::check_cross_entropy_args("cross_entropy_backward", rows, cols, targets,
                                   label_smoothing);
  const float s = label_smoothing;
  const float q_off = softmax_math::cross_entropy_off_mass(s, cols);
  dispatch(dtype, dlogits_dtype, [&](auto t, auto to) {
    using T = decltype(t);
    using TO = decltype(to);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<float> x = load_row(static_cast<const T*>(logits) + r * cols, cols);
      TO* d = static_cast<TO*>(dlogits) + r * cols;
      const float m = row_max(x);
      float sum = 0.0f;
      for (float v : x) sum += std::exp(v - m);
      const float inv = 1.0f / sum;
      const float g = grad_per_row[r];
      for (std::int64_t c = 0; c < cols; ++c) {
        d[c] = TO(softmax_math::cross_entropy_grad(g, x[c], m, inv, c == targets[r], q_off, s));
      }
    }
  });
}

}  // namespace ref
}  // namespace mixprec::kernels
