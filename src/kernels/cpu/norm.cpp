// Dispatching batch norm / layer norm. Batch norm runs channel by channel: a channel's values
// (n rows of s contiguous values) are read once from memory for the mean, then again from L2
// for the variance and the output (or, in backward, for the gradient sums and dx), so the
// two-pass variance costs little more than one pass. Channels are split across OpenMP threads
// (each channel entirely on one thread, so results do not depend on the thread count). The rows
// go to the AVX-512 row kernels when allowed, else to the scalar row loops below; row sums are
// widened to double before being added across rows. Short rows (s < 16, e.g. [N, C] inputs)
// and dtype combinations the vector rows do not cover use the reference.
#include "kernels/norm.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/norm_avx512.h"

namespace mixprec::kernels {
namespace {

static_assert(static_cast<int>(DType::f32) == 0 && static_cast<int>(DType::bf16) == 1 &&
              static_cast<int>(DType::f16) == 2);
int code(DType t) { return static_cast<int>(t); }

/// Rows shorter than this go to the reference: a call per row would cost more than the row.
constexpr std::int64_t kMinRow = 16;

template <class T>
const T* tp(const void* p) { return static_cast<const T*>(p); }

/// The row operations of one implementation: AVX-512 rows, or portable scalar loops.
/// in: dtype of x (and dy); out: dtype of y / dx.
struct RowOps {
  bool vec;
  DType in, out;

  double sum(const void* x, std::int64_t len) const {
    if (vec) return avx512::norm_row_sum(x, code(in), len);
    return dispatch(in, [&](auto t) {
      double s = 0.0;
      for (std::int64_t i = 0; i < len; ++i) s += static_cast<float>(tp<decltype(t)>(x)[i]);
      return s;
    });
  }
  double sq_dev_sum(const void* x, std::int64_t len, float mean) const {
    if (vec) return avx512::norm_row_sq_dev_sum(x, code(in), len, mean);
    return dispatch(in, [&](auto t) {
      double s = 0.0;
      for (std::int64_t i = 0; i < len; ++i) {
        const double dev = static_cast<double>(static_cast<float>(tp<decltype(t)>(x)[i])) - mean;
        s += dev * dev;
      }
      return s;
    });
  }
  void apply(const void* x, std::int64_t len, float mean, float scale, float shift,
             void* y) const {
    if (vec) {
      avx512::norm_row_apply(x, code(in), len, mean, scale, shift, y, code(out));
      return;
    }
    dispatch(in, [&](auto ti) {
      dispatch(out, [&](auto to) {
        using TO = decltype(to);
        const auto* xs = tp<decltype(ti)>(x);
        for (std::int64_t i = 0; i < len; ++i) {
          static_cast<TO*>(y)[i] = TO((static_cast<float>(xs[i]) - mean) * scale + shift);
        }
      });
    });
  }
  void backward_sums(const void* x, const void* dy, std::int64_t len, float mean,
                     double* sum_dy, double* sum_dy_xmu) const {
    if (vec) {
      float a = 0.0f, b = 0.0f;
      avx512::norm_row_backward_sums(x, dy, code(in), len, mean, &a, &b);
      *sum_dy += a;
      *sum_dy_xmu += b;
      return;
    }
    dispatch(in, [&](auto t) {
      using T = decltype(t);
      for (std::int64_t i = 0; i < len; ++i) {
        const double g = static_cast<float>(tp<T>(dy)[i]);
        *sum_dy += g;
        *sum_dy_xmu += g * (static_cast<double>(static_cast<float>(tp<T>(x)[i])) - mean);
      }
    });
  }
  void backward_dx(const void* x, const void* dy, std::int64_t len, float mean, float k1,
                   float k2, float k3, void* dx) const {
    if (vec) {
      avx512::norm_row_backward_dx(x, dy, code(in), len, mean, k1, k2, k3, dx, code(out));
      return;
    }
    dispatch(in, [&](auto ti) {
      dispatch(out, [&](auto to) {
        using TI = decltype(ti);
        using TO = decltype(to);
        for (std::int64_t i = 0; i < len; ++i) {
          const float xmu = static_cast<float>(tp<TI>(x)[i]) - mean;
          static_cast<TO*>(dx)[i] = TO(static_cast<float>(tp<TI>(dy)[i]) * k1 + (xmu * k2 + k3));
        }
      });
    });
  }
};

/// Picks the implementation and logs it: "avx512", "scalar" (portable row loops) or
/// "reference". Returns false when the reference must run.
bool choose(const char* op, DType in, DType out, bool rows_ok, bool pair_ok, RowOps* ops) {
  // Refuse fp8 here, on the calling thread: the row loops dispatch inside parallel regions.
  require_compute_dtype(op, in);
  require_compute_dtype(op, out);
  std::string why_not = cpu::avx512_unavailable_reason();
  if (why_not.empty() && !pair_ok) why_not = "avx512: dtype combination not vectorised";
  const bool use_rows = rows_ok;
  if (!rows_ok) {
    why_not += std::string(why_not.empty() ? "" : "; ") + "rows of fewer than " +
               std::to_string(kMinRow) + " values";
  }
  const bool vec = use_rows && why_not.empty();
  if (verbose_enabled()) {
    verbose_log(op, cpu::dtype_label(in, out), vec ? "avx512" : use_rows ? "scalar" : "reference",
                why_not);
  }
  *ops = RowOps{vec, in, out};
  return use_rows;
}

bool vec_pair(DType in, DType out) { return out == in || out == DType::f32; }

const void* row_at(const void* p, DType t, BatchNormDims d, std::int64_t n, std::int64_t c) {
  return cpu::at(p, t, (n * d.c + c) * d.s);
}
void* row_at(void* p, DType t, BatchNormDims d, std::int64_t n, std::int64_t c) {
  return cpu::at(p, t, (n * d.c + c) * d.s);
}

/// Asks for the next row of a channel while the current one is summed: a channel's rows are
/// short runs (e.g. 784 values) a whole sample apart, which the hardware prefetcher follows badly.
void prefetch_row(const void* p, DType t, std::int64_t len) {
  const char* c = static_cast<const char*>(p);
  const std::int64_t bytes = len * static_cast<std::int64_t>(size_of(t));
  for (std::int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off);
}

bool parallel_over(std::int64_t work, std::int64_t count) {
  return work >= cpu::kParallelMinWork && count > 1;
}

}  // namespace

namespace cpu {
void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype) {
  const char* op = "batch_norm";
  detail::check_batch_norm_args(op, d, eps, training);
  RowOps ops{};
  if (!choose(op, x_dtype, y_dtype, d.s >= kMinRow, vec_pair(x_dtype, y_dtype), &ops)) {
    return ref::batch_norm_forward(x, x_dtype, d, weight, bias, eps, training, mean, var, y,
                                   y_dtype);
  }
  const double count = static_cast<double>(d.n * d.s);
  cpu::parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    if (training) {
      double sum = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n) {
        if (n + 1 < d.n) prefetch_row(row_at(x, x_dtype, d, n + 1, c), x_dtype, d.s);
        sum += ops.sum(row_at(x, x_dtype, d, n, c), d.s);
      }
      const float m = static_cast<float>(sum / count);
      double sq = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n) {
        sq += ops.sq_dev_sum(row_at(x, x_dtype, d, n, c), d.s, m);
      }
      mean[c] = m;
      var[c] = static_cast<float>(sq / count);
    }
    const float invstd = norm_invstd(var[c], eps);
    const float scale = invstd * (weight != nullptr ? weight[c] : 1.0f);
    const float shift = bias != nullptr ? bias[c] : 0.0f;
    for (std::int64_t n = 0; n < d.n; ++n) {
      ops.apply(row_at(x, x_dtype, d, n, c), d.s, mean[c], scale, shift,
                row_at(y, y_dtype, d, n, c));
    }
  });
}

void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  const char* op = "batch_norm_backward";
  detail::check_batch_norm_args(op, d, eps, training);
  RowOps ops{};
  const bool pair_ok = dy_dtype == x_dtype && vec_pair(x_dtype, dx_dtype);
  // The scalar rows read x and dy through one dtype too, so mixed x/dy goes to the reference.
  if (!choose(op, x_dtype, dx_dtype, d.s >= kMinRow && dy_dtype == x_dtype, pair_ok, &ops)) {
    return ref::batch_norm_backward(x, x_dtype, dy, dy_dtype, d, mean, var, eps, weight,
                                    training, dx, dx_dtype, dweight, dbias);
  }
  const double count = static_cast<double>(d.n * d.s);
  cpu::parallel_for(d.c, parallel_over(d.n * d.c * d.s, d.c), [&](std::int64_t c) {
    const float m = mean[c];
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    for (std::int64_t n = 0; n < d.n; ++n) {
      if (n + 1 < d.n) {
        prefetch_row(row_at(x, x_dtype, d, n + 1, c), x_dtype, d.s);
        prefetch_row(row_at(dy, dy_dtype, d, n + 1, c), dy_dtype, d.s);
      }
      ops.backward_sums(row_at(x, x_dtype, d, n, c), row_at(dy, dy_dtype, d, n, c), d.s, m,
                        &sum_dy, &sum_dy_xmu);
    }
    const float invstd = norm_invstd(var[c], eps);
    if (dweight != nullptr) dweight[c] = static_cast<float>(sum_dy_xmu) * invstd;
    if (dbias != nullptr) dbias[c] = static_cast<float>(sum_dy);
    if (dx == nullptr) return;
    const float k1 = invstd * (weight != nullptr ? weight[c] : 1.0f);
    const float k2 =
        training ? -k1 * invstd * invstd * static_cast<float>(sum_dy_xmu / count) : 0.0f;
    const float k3 = training ? -k1 * static_cast<float>(sum_dy / count) : 0.0f;
    for (std::int64_t n = 0; n < d.n; ++n) {
      ops.backward_dx(row_at(x, x_dtype, d, n, c), row_at(dy, dy_dtype, d, n, c), d.s, m, k1,
                      k2, k3, row_at(dx, dx_dtype, d, n, c));
    }
  });
}

void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd) {
  const char* op = "layer_norm";
  detail::check_layer_norm_args(op, rows, cols, eps);
  RowOps ops{};
  if (!choose(op, x_dtype, y_dtype, cols >= kMinRow, vec_pair(x_dtype, y_dtype), &ops)) {
    return ref::layer_norm_forward(x, x_dtype, rows, cols, weight, bias, eps, y, y_dtype, mean,
                                   rstd);
  }
  dispatch(y_dtype, [&](auto ty) {
    using TY = decltype(ty);
    cpu::parallel_for(rows, parallel_over(rows * cols, rows), [&](std::int64_t r) {
      const void* xr = cpu::at(x, x_dtype, r * cols);
      const float m = static_cast<float>(ops.sum(xr, cols) / static_cast<double>(cols));
      const float rs = norm_invstd(
          static_cast<float>(ops.sq_dev_sum(xr, cols, m) / static_cast<double>(cols)), eps);
      mean[r] = m;
      rstd[r] = rs;
      if (weight == nullptr && bias == nullptr) {
        ops.apply(xr, cols, m, rs, 0.0f, cpu::at(y, y_dtype, r * cols));
        return;
      }
      TY* yr = static_cast<TY*>(y) + r * cols;
      for (std::int64_t j = 0; j < cols; ++j) {
        const float xhat = (cpu::load_f32(xr, x_dtype, j) - m) * rs;
        yr[j] = TY(xhat * (weight != nullptr ? weight[j] : 1.0f) +
                   (bias != nullptr ? bias[j] : 0.0f));
      }
    });
  });
}

void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  const char* op = "layer_norm_backward";
  detail::check_layer_norm_args(op, rows, cols, 0.0f);
  // Portable loops (no AVX-512 rows: the per-column weight makes them a different kernel);
  // rows in parallel for dx, column blocks in parallel for dweight/dbias, each output computed
  // by one thread in a fixed order, so results do not depend on the thread count.
  if (verbose_enabled()) verbose_log(op, cpu::dtype_label(x_dtype, dx_dtype), "scalar", {});
  const bool parallel = rows * cols >= cpu::kParallelMinWork;
  dispatch(x_dtype, [&](auto tx) {
    using TX = decltype(tx);
    dispatch(dy_dtype, [&](auto tdy) {
      using TDY = decltype(tdy);
      const TX* xs = tp<TX>(x);
      const TDY* dys = tp<TDY>(dy);
      if (dx != nullptr) {
        dispatch(dx_dtype, [&](auto tdx) {
          using TDX = decltype(tdx);
          cpu::parallel_for(rows, parallel && rows > 1, [&](std::int64_t r) {
            const std::int64_t base = r * cols;
            const float m = mean[r], rs = rstd[r];
            double sum_g = 0.0, sum_g_xhat = 0.0;
            for (std::int64_t j = 0; j < cols; ++j) {
              const float g = static_cast<float>(dys[base + j]) * (weight ? weight[j] : 1.0f);
              sum_g += g;
              sum_g_xhat += static_cast<double>(g) * ((static_cast<float>(xs[base + j]) - m) * rs);
            }
            const float a = static_cast<float>(sum_g / static_cast<double>(cols));
            const float b = static_cast<float>(sum_g_xhat / static_cast<double>(cols));
            TDX* out = static_cast<TDX*>(dx) + base;
            for (std::int64_t j = 0; j < cols; ++j) {
              const float g = static_cast<float>(dys[base + j]) * (weight ? weight[j] : 1.0f);
              const float xhat = (static_cast<float>(xs[base + j]) - m) * rs;
              out[j] = TDX(rs * (g - a - xhat * b));
            }
          });
        });
      }
      if (dweight == nullptr && dbias == nullptr) return;
      constexpr std::int64_t kBlock = 64;
      const std::int64_t blocks = (cols + kBlock - 1) / kBlock;
      cpu::parallel_for(blocks, parallel && blocks > 1, [&](std::int64_t blk) {
        const std::int64_t j0 = blk * kBlock, j1 = std::min(cols, j0 + kBlock);
        double sw[kBlock] = {}, sb[kBlock] = {};
        for (std::int64_t r = 0; r < rows; ++r) {
          const float m = mean[r], rs = rstd[r];
          for (std::int64_t j = j0; j < j1; ++j) {
            const float g = static_cast<float>(dys[r * cols + j]);
            sb[j - j0] += g;
            sw[j - j0] += static_cast<double>(g) * ((static_cast<float>(xs[r * cols + j]) - m) * rs);
          }
        }
        for (std::int64_t j = j0; j < j1; ++j) {
          if (dweight != nullptr) dweight[j] = static_cast<float>(sw[j - j0]);
          if (dbias != nullptr) dbias[j] = static_cast<float>(sb[j - j0]);
        }
      });
    });
  });
}
}  // namespace cpu

}  // namespace mixprec::kernels
