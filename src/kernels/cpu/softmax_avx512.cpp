// AVX-512 softmax / log-softmax / cross-entropy rows: a max pass, an exp-and-sum pass (exp kept
// in f32 scratch when it is needed again) and a write pass, all 16 lanes wide with masked tails.
// Same formulas and operation order as the reference; sums are reordered (lane-wise partial
// sums) and exp/log are the vecmath approximations.
#include "kernels/cpu/softmax_avx512.h"

#include <cstdint>

#include "kernels/cpu/vecmath_avx512.h"

namespace mixprec::kernels::avx512 {
namespace {

inline float scalar_nan_max(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

/// NaN-propagating max of the row (a NaN anywhere makes the row NaN, as in the reference).
template <int DT>
float row_max(const void* x, std::int64_t cols) {
  const __m512 ident = _mm512_set1_ps(-__builtin_inff());
  __m512 a0 = ident, a1 = ident;
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    a0 = nan_max(a0, load<DT>(x, i));
    a1 = nan_max(a1, load<DT>(x, i + 16));
  }
  for (; i < cols; i += 16) {
    const __mmask16 m = tail_mask(cols - i);
    a0 = nan_max(a0, _mm512_mask_mov_ps(ident, m, load<DT>(x, i, m)));
  }
  alignas(64) float lane[16];
  _mm512_store_ps(lane, nan_max(a0, a1));
  float r = lane[0];
  for (int j = 1; j < 16; ++j) r = scalar_nan_max(r, lane[j]);
  return r;
}

/// sum exp(x - m), also writing exp(x - m) to ws when ws is not null.
template <int DT>
float sum_exp(const void* x, std::int64_t cols, float m, float* ws) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < cols; i += 16) {
    const __mmask16 k = tail_mask(cols - i);
    const __m512 e = exp_ps(_mm512_sub_ps(load<DT>(x, i, k), vm));
    acc = _mm512_mask_add_ps(acc, k, acc, e);
    if (ws != nullptr) _mm512_mask_storeu_ps(ws + i, k, e);
  }
  return hsum(acc);
}

inline float scalar_log(float v) { return _mm512_cvtss_f32(log_ps(_mm512_set1_ps(v))); }

}  // namespace

bool softmax_row(const void* in, int in_dtype, void* out, int out_dtype, std::int64_t cols,
                 bool log, float* ws) {
  return with_dtype_pair(in_dtype, out_dtype, [&](auto ti, auto to) {
    constexpr int DI = decltype(ti)::value, DO = decltype(to)::value;
    const float m = row_max<DI>(in, cols);
    if (log) {
      const float lse = scalar_log(sum_exp<DI>(in, cols, m, nullptr));
      const __m512 vm = _mm512_set1_ps(m), vl = _mm512_set1_ps(lse);
      for (std::int64_t i = 0; i < cols; i += 16) {
        const __mmask16 k = tail_mask(cols - i);
        store<DO>(out, i, _mm512_sub_ps(_mm512_sub_ps(load<DI>(in, i, k), vm), vl), k);
      }
    } else {
      const __m512 inv = _mm512_set1_ps(1.0f / sum_exp<DI>(in, cols, m, ws));
      for (std::int64_t i = 0; i < cols; i += 16) {
        const __mmask16 k = tail_mask(cols - i);
        store<DO>(out, i, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, ws + i), inv), k);
      }
    }
  });
}

bool softmax_backward_row(const void* y, const void* dy, int dtype, void* dx, int dx_dtype,
                          std::int64_t cols, bool log) {
  return with_dtype_pair(dtype, dx_dtype, [&](auto ti, auto to) {
    constexpr int DI = decltype(ti)::value, DO = decltype(to)::value;
    __m512 acc = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < cols; i += 16) {  // log: sum(dy); else sum(dy * y)
      const __mmask16 k = tail_mask(cols - i);
      const __m512 g = load<DI>(dy, i, k);
      acc = log ? _mm512_add_ps(acc, g) : _mm512_fmadd_ps(g, load<DI>(y, i, k), acc);
    }
    const __m512 s = _mm512_set1_ps(hsum(acc));
    for (std::int64_t i = 0; i < cols; i += 16) {
      const __mmask16 k = tail_mask(cols - i);
      const __m512 g = load<DI>(dy, i, k), yv = load<DI>(y, i, k);
      const __m512 d = log ? _mm512_sub_ps(g, _mm512_mul_ps(exp_ps(yv), s))
                           : _mm512_mul_ps(yv, _mm512_sub_ps(g, s));
      store<DO>(dx, i, d, k);
    }
  });
}

void cross_entropy_row_stats(const void* x, int dtype, std::int64_t cols, float* max,
                             float* sum_exp_out, float* sum_shifted) {
  with_dtype(dtype, [&](auto t) {
    constexpr int DT = decltype(t)::value;
    const float m = row_max<DT>(x, cols);
    const __m512 vm = _mm512_set1_ps(m);
    __m512 se = _mm512_setzero_ps(), ss = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < cols; i += 16) {
      const __mmask16 k = tail_mask(cols - i);
      const __m512 d = _mm512_sub_ps(load<DT>(x, i, k), vm);
      se = _mm512_mask_add_ps(se, k, se, exp_ps(d));
      ss = _mm512_mask_add_ps(ss, k, ss, d);
    }
    *max = m;
    *sum_exp_out = hsum(se);
    *sum_shifted = hsum(ss);
  });
}

bool cross_entropy_backward_row(const void* x, int dtype, std::int64_t cols, std::int64_t target,
                                float label_smoothing, float grad, void* dx, int dx_dtype,
                                float* ws) {
  return with_dtype_pair(dtype, dx_dtype, [&](auto ti, auto to) {
    constexpr int DI = decltype(ti)::value, DO = decltype(to)::value;
    const float m = row_max<DI>(x, cols);
    const __m512 inv = _mm512_set1_ps(1.0f / sum_exp<DI>(x, cols, m, ws));
    const float q_off = label_smoothing / static_cast<float>(cols);
    const __m512 q = _mm512_set1_ps(q_off);
    const __m512 q_target = _mm512_set1_ps(q_off + (1.0f - label_smoothing));
    const __m512 g = _mm512_set1_ps(grad);
    for (std::int64_t i = 0; i < cols; i += 16) {
      const __mmask16 k = tail_mask(cols - i);
      __m512 qi = q;
      if (target >= i && target < i + 16) {
        qi = _mm512_mask_mov_ps(q, static_cast<__mmask16>(1u << (target - i)), q_target);
      }
      const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, ws + i), inv);
      store<DO>(dx, i, _mm512_mul_ps(g, _mm512_sub_ps(p, qi)), k);
    }
  });
}

}  // namespace mixprec::kernels::avx512
