// AVX-512 row kernels for batch norm. Sums use four 16-lane f32 accumulators (so the adds
// overlap) combined in a fixed order, then the 16 lanes: deterministic for a given row length.
// A row is at most one image plane per call (e.g. 784 values), so each lane sums a few dozen
// values in f32 before the caller widens the row total to double: the f32 rounding error per
// row stays near 2^-24 * (len / 64) relative.
#include "kernels/cpu/norm_avx512.h"

#include <cstdint>

#include "kernels/cpu/vecmath_avx512.h"

namespace mixprec::kernels::avx512 {
namespace {

/// Folds f(acc, v) over the row in 4 x 16 lanes and returns the lanes summed in a fixed order.
template <int DT, class Step>
inline float fold_row(const void* x, std::int64_t len, Step step) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    a0 = step(a0, load<DT>(x, i), i);
    a1 = step(a1, load<DT>(x, i + 16), i + 16);
    a2 = step(a2, load<DT>(x, i + 32), i + 32);
    a3 = step(a3, load<DT>(x, i + 48), i + 48);
  }
  for (; i + 16 <= len; i += 16) a0 = step(a0, load<DT>(x, i), i);
  if (i < len) {
    const __mmask16 m = tail_mask(len - i);
    a1 = _mm512_mask_mov_ps(a1, m, step(a1, load<DT>(x, i, m), i));
  }
  return hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <int DT>
float row_sum(const void* x, std::int64_t len) {
  return fold_row<DT>(x, len, [](__m512 a, __m512 v, std::int64_t) { return _mm512_add_ps(a, v); });
}

template <int DT>
float row_sq_dev_sum(const void* x, std::int64_t len, float mean) {
  const __m512 m = _mm512_set1_ps(mean);
  return fold_row<DT>(x, len, [m](__m512 a, __m512 v, std::int64_t) {
    const __m512 d = _mm512_sub_ps(v, m);
    return _mm512_fmadd_ps(d, d, a);
  });
}

template <int DT, int OT>
void row_apply(const void* x, std::int64_t len, float mean, float scale, float shift, void* y) {
  const __m512 m = _mm512_set1_ps(mean), k = _mm512_set1_ps(scale), b = _mm512_set1_ps(shift);
  std::int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    store<OT>(y, i, _mm512_fmadd_ps(_mm512_sub_ps(load<DT>(x, i), m), k, b));
  }
  if (i < len) {
    const __mmask16 t = tail_mask(len - i);
    store<OT>(y, i, _mm512_fmadd_ps(_mm512_sub_ps(load<DT>(x, i, t), m), k, b), t);
  }
}

template <int DT>
void row_backward_sums(const void* x, const void* dy, std::int64_t len, float mean,
                       float* sum_dy, float* sum_dy_xmu) {
  const __m512 m = _mm512_set1_ps(mean);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, p0 = s0, p1 = s0;
  std::int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const __m512 g0 = load<DT>(dy, i), g1 = load<DT>(dy, i + 16);
    s0 = _mm512_add_ps(s0, g0);
    s1 = _mm512_add_ps(s1, g1);
    p0 = _mm512_fmadd_ps(g0, _mm512_sub_ps(load<DT>(x, i), m), p0);
    p1 = _mm512_fmadd_ps(g1, _mm512_sub_ps(load<DT>(x, i + 16), m), p1);
  }
  for (; i < len; i += 16) {
    const __mmask16 t = tail_mask(len - i);
    const __m512 g = load<DT>(dy, i, t);
    s0 = _mm512_add_ps(s0, g);
    // Masked-off lanes load 0 for both x and dy, so g * (0 - mean) adds exactly 0.
    p0 = _mm512_fmadd_ps(g, _mm512_sub_ps(load<DT>(x, i, t), m), p0);
  }
  *sum_dy = hsum(_mm512_add_ps(s0, s1));
  *sum_dy_xmu = hsum(_mm512_add_ps(p0, p1));
}

template <int DT, int OT>
void row_backward_dx(const void* x, const void* dy, std::int64_t len, float mean, float k1,
                     float k2, float k3, void* dx) {
  const __m512 m = _mm512_set1_ps(mean), v1 = _mm512_set1_ps(k1), v2 = _mm512_set1_ps(k2),
               v3 = _mm512_set1_ps(k3);
  std::int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    const __m512 r = _mm512_fmadd_ps(_mm512_sub_ps(load<DT>(x, i), m), v2, v3);
    store<OT>(dx, i, _mm512_fmadd_ps(load<DT>(dy, i), v1, r));
  }
  if (i < len) {
    const __mmask16 t = tail_mask(len - i);
    const __m512 r = _mm512_fmadd_ps(_mm512_sub_ps(load<DT>(x, i, t), m), v2, v3);
    store<OT>(dx, i, _mm512_fmadd_ps(load<DT>(dy, i, t), v1, r), t);
  }
}

}  // namespace

float norm_row_sum(const void* x, int dtype, std::int64_t len) {
  float r = 0.0f;
  with_dtype(dtype, [&](auto d) { r = row_sum<decltype(d)::value>(x, len); });
  return r;
}

float norm_row_sq_dev_sum(const void* x, int dtype, std::int64_t len, float mean) {
  float r = 0.0f;
  with_dtype(dtype, [&](auto d) { r = row_sq_dev_sum<decltype(d)::value>(x, len, mean); });
  return r;
}

bool norm_row_apply(const void* x, int dtype, std::int64_t len, float mean, float scale,
                    float shift, void* y, int y_dtype) {
  return with_dtype_pair(dtype, y_dtype, [&](auto in, auto out) {
    row_apply<decltype(in)::value, decltype(out)::value>(x, len, mean, scale, shift, y);
  });
}

void norm_row_backward_sums(const void* x, const void* dy, int dtype, std::int64_t len,
                            float mean, float* sum_dy, float* sum_dy_xmu) {
  with_dtype(dtype, [&](auto d) {
    row_backward_sums<decltype(d)::value>(x, dy, len, mean, sum_dy, sum_dy_xmu);
  });
}

bool norm_row_backward_dx(const void* x, const void* dy, int dtype, std::int64_t len, float mean,
                          float k1, float k2, float k3, void* dx, int dx_dtype) {
  return with_dtype_pair(dtype, dx_dtype, [&](auto in, auto out) {
    row_backward_dx<decltype(in)::value, decltype(out)::value>(x, dy, len, mean, k1, k2, k3, dx);
  });
}

}  // namespace mixprec::kernels::avx512
