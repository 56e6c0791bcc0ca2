// Reference batch norm and layer norm: plain scalar loops, the spec. Sums accumulate in double
// (so the reference is more accurate than any f32 kernel it is compared with), statistics are
// rounded to f32 once, and every per-element formula is the one written in kernels/norm.h, computed
// by kernels/spec/norm_math.h (which a device backend compiles too).
#include <cmath>

#include "kernels/norm.h"
#include "kernels/spec/norm_math.h"

namespace mixprec::kernels {

void detail::check_batch_norm_args(const char* op, BatchNormDims d, float eps, bool training) {
  MIXPREC_CHECK(d.n >= 0 && d.c >= 0 && d.s >= 0, ShapeError, op,
                "negative extent (n " << d.n << ", c " << d.c << ", s " << d.s << ")");
  MIXPREC_CHECK(eps >= 0.0f, ValueError, op, "eps must be >= 0, got " << eps);
  MIXPREC_CHECK(!training || d.c == 0 || d.n * d.s > 1, ValueError, op,
                "Expected more than 1 value per channel when training, got " << d.n * d.s
                    << "; use a batch of at least 2 or eval mode");
}

void detail::check_layer_norm_args(const char* op, std::int64_t rows, std::int64_t cols,
                                   float eps) {
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
  MIXPREC_CHECK(eps >= 0.0f, ValueError, op, "eps must be >= 0, got " << eps);
}

namespace ref {
namespace {

template <class T>
float at(const void* p, std::int64_t i) {
  return static_cast<float>(static_cast<const T*>(p)[i]);
}

}  // namespace

void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype, const void* residual, bool relu) {
  detail::check_batch_norm_args("batch_norm", d, eps, training);
  const double count = static_cast<double>(d.n * d.s);
  dispatch(x_dtype, y_dtype, [&](auto tx, auto ty) {
    using TX = decltype(tx);
    using TY = decltype(ty);
    for (std::int64_t c = 0; c < d.c; ++c) {
      auto idx = [&](std::int64_t n, std::int64_t s) { return (n * d.c + c) * d.s + s; };
      if (training) {
        double sum = 0.0;
        for (std::int64_t n = 0; n < d.n; ++n)
          for (std::int64_t s = 0; s < d.s; ++s) sum += at<TX>(x, idx(n, s));
        const float m = static_cast<float>(sum / count);
        double sq = 0.0;
        for (std::int64_t n = 0; n < d.n; ++n)
          for (std::int64_t s = 0; s < d.s; ++s) {
            const double dev = static_cast<double>(at<TX>(x, idx(n, s))) - m;
            sq += dev * dev;
          }
        mean[c] = m;
        var[c] = static_cast<float>(sq / count);
      }
      const float invstd = norm_invstd(var[c], eps);
      const float w = weight != nullptr ? weight[c] : 1.0f;
      const float b = bias != nullptr ? bias[c] : 0.0f;
      for (std::int64_t n = 0; n < d.n; ++n)
        for (std::int64_t s = 0; s < d.s; ++s) {
          const float v = at<TX>(x, idx(n, s));
          const float z = norm_math::batch_norm_apply(v, mean[c], invstd, w, b);
          const float r = residual != nullptr ? at<TY>(residual, idx(n, s)) : 0.0f;
          static_cast<TY*>(y)[idx(n, s)] = TY(norm_math::batch_norm_epilogue(
              z, [](float u) { return static_cast<float>(TY(u)); }, residual != nullptr, r,
              relu));
        }
    }
  });
}

void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias, const void* relu_y, void* dresidual) {
  detail::check_batch_norm_args("batch_norm_backward", d, eps, training);
  const double count = static_cast<double>(d.n * d.s);
  dispatch(x_dtype, dy_dtype, dx_dtype, [&](auto tx, auto tdy, auto tdx) {
    using TX = decltype(tx);
    using TDY = decltype(tdy);
    using TDX = decltype(tdx);
    for (std::int64_t c = 0; c < d.c; ++c) {
      auto idx = [&](std::int64_t n, std::int64_t s) { return (n * d.c + c) * d.s + s; };
      // The gradient batch norm itself receives: dy, or dy through the fused ReLU (exact: a
      // value of dy or 0, so it needs no rounding to be the residual's gradient too).
      auto grad = [&](std::int64_t i) {
        const float g = at<TDY>(dy, i);
        return relu_y != nullptr ? norm_math::batch_norm_relu_grad(at<TDY>(relu_y, i), g) : g;
      };
      const float m = mean[c];
      double sum_dy = 0.0, sum_dy_xmu = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n)
        for (std::int64_t s = 0; s < d.s; ++s) {
          const double g = grad(idx(n, s));
          if (dresidual != nullptr) static_cast<TDY*>(dresidual)[idx(n, s)] = TDY(static_cast<float>(g));
          sum_dy += g;
          sum_dy_xmu += g * (static_cast<double>(at<TX>(x, idx(n, s))) - m);
        }
      const float invstd = norm_invstd(var[c], eps);
      if (dweight != nullptr) dweight[c] = static_cast<float>(sum_dy_xmu) * invstd;
      if (dbias != nullptr) dbias[c] = static_cast<float>(sum_dy);
      if (dx == nullptr) continue;
      const BatchNormGradCoefs k =
          batch_norm_grad_coefs(var[c], eps, weight != nullptr ? weight[c] : 1.0f, sum_dy,
                                sum_dy_xmu, count, training);
      for (std::int64_t n = 0; n < d.n; ++n)
        for (std::int64_t s = 0; s < d.s; ++s) {
          const float g = grad(idx(n, s));
          const float xmu = at<TX>(x, idx(n, s)) - m;
          static_cast<TDX*>(dx)[idx(n, s)] = TDX(norm_math::batch_norm_grad_apply(g, xmu, k));
        }
    }
  });
}

void batch_norm_stats(const void* x, DType x_dtype, BatchNormDims d, double* mean, double* m2) {
  detail::check_batch_norm_args("batch_norm_stats", d, 0.0f, false);
  const double count = static_cast<double>(d.n * d.s);
  dispatch(x_dtype, [&](auto tx) {
    using TX = decltype(tx);
    for (std::int64_t c = 0; c < d.c; ++c) {
      auto idx = [&](std::int64_t n, std::int64_t s) { return (n * d.c + c) * d.s + s; };
      double sum = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n)
        for (std::int64_t s = 0; s < d.s; ++s) sum += at<TX>(x, idx(n, s));
      const double m = count > 0 ? sum / count : 0.0;
      double sq = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n)
        for (std::int64_t s = 0; s < d.s; ++s) {
          const double dev = static_cast<double>(at<TX>(x, idx(n, s))) - m;
          sq += dev * dev;
        }
      mean[c] = m;
      m2[c] = sq;
    }
  });
}

void batch_norm_backward_reduce(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                                BatchNormDims d, const float* mean, double* sum_dy,
                                double* sum_dy_xmu) {
  detail::check_batch_norm_args("batch_norm_backward_reduce", d, 0.0f, false);
  dispatch(x_dtype, dy_dtype, [&](auto tx, auto tdy) {
    using TX = decltype(tx);
    using TDY = decltype(tdy);
    for (std::int64_t c = 0; c < d.c; ++c) {
      auto idx = [&](std::int64_t n, std::int64_t s) { return (n * d.c + c) * d.s + s; };
      double a = 0.0, b = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n)
        for (std::int64_t s = 0; s < d.s; ++s) {
          const double g = at<TDY>(dy, idx(n, s));
          a += g;
          b += g * (static_cast<double>(at<TX>(x, idx(n, s))) - mean[c]);
        }
      sum_dy[c] = a;
      sum_dy_xmu[c] = b;
    }
  });
}

void batch_norm_backward_elemt(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                               BatchNormDims d, const float* mean, const float* var, float eps,
                               const float* weight, const double* sum_dy,
                               const double* sum_dy_xmu, double count, void* dx, DType dx_dtype) {
  detail::check_batch_norm_args("batch_norm_backward_elemt", d, eps, false);
  dispatch(x_dtype, dy_dtype, dx_dtype, [&](auto tx, auto tdy, auto tdx) {
    using TX = decltype(tx);
    using TDY = decltype(tdy);
    using TDX = decltype(tdx);
    for (std::int64_t c = 0; c < d.c; ++c) {
      auto idx = [&](std::int64_t n, std::int64_t s) { return (n * d.c + c) * d.s + s; };
      const BatchNormGradCoefs k =
          batch_norm_grad_coefs(var[c], eps, weight != nullptr ? weight[c] : 1.0f,
                                sum_dy[c], sum_dy_xmu[c], count, true);
      for (std::int64_t n = 0; n < d.n; ++n)
        for (std::int64_t s = 0; s < d.s; ++s) {
          const float g = at<TDY>(dy, idx(n, s));
          const float xmu = at<TX>(x, idx(n, s)) - mean[c];
          static_cast<TDX*>(dx)[idx(n, s)] = TDX(norm_math::batch_norm_grad_apply(g, xmu, k));
        }
    }
  });
}

void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd) {
  detail::check_layer_norm_args("layer_norm", rows, cols, eps);
  dispatch(x_dtype, y_dtype, [&](auto tx, auto ty) {
    using TX = decltype(tx);
    using TY = decltype(ty);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t base = r * cols;
      double sum = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) sum += at<TX>(x, base + j);
      const float m = cols > 0 ? static_cast<float>(sum / static_cast<double>(cols)) : 0.0f;
      double sq = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) {
        const double dev = static_cast<double>(at<TX>(x, base + j)) - m;
        sq += dev * dev;
      }
      const float v = cols > 0 ? static_cast<float>(sq / static_cast<double>(cols)) : 0.0f;
      const float rs = norm_invstd(v, eps);
      mean[r] = m;
      rstd[r] = rs;
      for (std::int64_t j = 0; j < cols; ++j) {
        const float xhat = norm_math::layer_norm_xhat(at<TX>(x, base + j), m, rs);
        const float w = weight != nullptr ? weight[j] : 1.0f;
        const float b = bias != nullptr ? bias[j] : 0.0f;
        static_cast<TY*>(y)[base + j] = TY(norm_math::layer_norm_apply(xhat, w, b));
      }
    }
  });
}

void add_layer_norm_forward(const void* x, DType x_dtype, const void* delta, DType delta_dtype,
                            std::int64_t rows, std::int64_t cols, const float* weight,
                            const float* bias, float eps, void* sum, DType sum_dtype, void* y,
                            DType y_dtype, float* mean, float* rstd) {
  detail::check_layer_norm_args("add_layer_norm", rows, cols, eps);
  dispatch(x_dtype, delta_dtype, sum_dtype, [&](auto tx, auto td, auto ts) {
    using TX = decltype(tx);
    using TD = decltype(td);
    using TS = decltype(ts);
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      static_cast<TS*>(sum)[i] = TS(at<TX>(x, i) + at<TD>(delta, i));
    }
  });
  // The norm reads the sum as stored: what layer_norm_forward of the add's output computes.
  layer_norm_forward(sum, sum_dtype, rows, cols, weight, bias, eps, y, y_dtype, mean, rstd);
}

void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  detail::check_layer_norm_args("layer_norm_backward", rows, cols, 0.0f);
  dispatch(x_dtype, dy_dtype, dx_dtype, [&](auto tx, auto tdy, auto tdx) {
    using TX = decltype(tx);
    using TDY = decltype(tdy);
    using TDX = decltype(tdx);
    if (dx != nullptr) {
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t base = r * cols;
        double sum_g = 0.0, sum_g_xhat = 0.0;
        for (std::int64_t j = 0; j < cols; ++j) {
          const double g = static_cast<double>(at<TDY>(dy, base + j)) *
                           (weight != nullptr ? weight[j] : 1.0f);
          sum_g += g;
          sum_g_xhat += g * norm_math::layer_norm_xhat(at<TX>(x, base + j), mean[r], rstd[r]);
        }
        const float a = static_cast<float>(sum_g / static_cast<double>(cols));
        const float b = static_cast<float>(sum_g_xhat / static_cast<double>(cols));
        for (std::int64_t j = 0; j < cols; ++j) {
          const float g = at<TDY>(dy, base + j) * (weight != nullptr ? weight[j] : 1.0f);
          const float xhat = norm_math::layer_norm_xhat(at<TX>(x, base + j), mean[r], rstd[r]);
          static_cast<TDX*>(dx)[base + j] =
              TDX(norm_math::layer_norm_grad_apply(rstd[r], g, a, xhat, b));
        }
      }
    }
    for (std::int64_t j = 0; j < cols && (dweight != nullptr || dbias != nullptr); ++j) {
      double sw = 0.0, sb = 0.0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double g = at<TDY>(dy, r * cols + j);
        sb += g;
        sw += g * norm_math::layer_norm_xhat(at<TX>(x, r * cols + j), mean[r], rstd[r]);
      }
      if (dweight != nullptr) dweight[j] = static_cast<float>(sw);
      if (dbias != nullptr) dbias[j] = static_cast<float>(sb);
    }
  });
}

}  // namespace ref
}  // namespace mixprec::kernels
