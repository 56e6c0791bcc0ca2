// AVX-512 elementwise kernels: 16 lanes at a time, masked loads/stores for the tail (so no
// scalar remainder loop and no out-of-bounds access). The formulas are the reference's, in the
// same operation order; only exp/log/tanh/erfc are approximations (see vecmath_avx512.h).
#include "kernels/cpu/elementwise_avx512.h"

#include <cstdint>

#include "kernels/cpu/vecmath_avx512.h"

namespace mixprec::kernels::avx512 {
namespace {

/// out[i] = f(in[i]) for i < n.
template <int DI, int DO, class F>
void map1(const void* in, void* out, std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 x0 = load<DI>(in, i);
    const __m512 x1 = load<DI>(in, i + 16);
    store<DO>(out, i, f(x0));
    store<DO>(out, i + 16, f(x1));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    store<DO>(out, i, f(load<DI>(in, i, m)), m);
  }
}

/// out[i] = f(a[i], b[i]) for i < n.
template <int DI, int DO, class F>
void map2(const void* a, const void* b, void* out, std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a0 = load<DI>(a, i), b0 = load<DI>(b, i);
    const __m512 a1 = load<DI>(a, i + 16), b1 = load<DI>(b, i + 16);
    store<DO>(out, i, f(a0, b0));
    store<DO>(out, i + 16, f(a1, b1));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    store<DO>(out, i, f(load<DI>(a, i, m), load<DI>(b, i, m)), m);
  }
}

inline __m512 neg_ps(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

/// Calls fn(f) with the vector function of op.
template <class Fn>
void with_unary(VUnary op, Fn&& fn) {
  switch (op) {
    case VUnary::neg: return fn([](__m512 x) { return neg_ps(x); });
    case VUnary::abs: return fn([](__m512 x) { return abs_ps(x); });
    case VUnary::exp: return fn([](__m512 x) { return exp_ps(x); });
    case VUnary::log: return fn([](__m512 x) { return log_ps(x); });
    case VUnary::sqrt: return fn([](__m512 x) { return _mm512_sqrt_ps(x); });
    case VUnary::rsqrt:  // a true division, not vrsqrt14: bit-identical to 1/std::sqrt
      return fn([](__m512 x) { return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(x)); });
    case VUnary::reciprocal:
      return fn([](__m512 x) { return _mm512_div_ps(_mm512_set1_ps(1.0f), x); });
    case VUnary::square: return fn([](__m512 x) { return _mm512_mul_ps(x, x); });
    case VUnary::relu:  // keep x where !(x <= 0), i.e. x > 0 or NaN; +0 elsewhere
      return fn([](__m512 x) {
        return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ), x);
      });
    case VUnary::gelu:  // (x/2) erfc(-x/sqrt2)
      return fn([](__m512 x) {
        const __m512 z = _mm512_mul_ps(neg_ps(x), _mm512_set1_ps(0.70710678118654752f));
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), erfc_ps(z));
      });
    case VUnary::tanh: return fn([](__m512 x) { return tanh_ps(x); });
    case VUnary::sigmoid:
      return fn([](__m512 x) {
        const __m512 one = _mm512_set1_ps(1.0f);
        return _mm512_div_ps(one, _mm512_add_ps(one, exp_ps(neg_ps(x))));
      });
  }
}

template <class Fn>
void with_binary(VBinary op, Fn&& fn) {
  switch (op) {
    case VBinary::add: return fn([](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
    case VBinary::sub: return fn([](__m512 a, __m512 b) { return _mm512_sub_ps(a, b); });
    case VBinary::mul: return fn([](__m512 a, __m512 b) { return _mm512_mul_ps(a, b); });
    case VBinary::div: return fn([](__m512 a, __m512 b) { return _mm512_div_ps(a, b); });
    case VBinary::maximum: return fn([](__m512 a, __m512 b) { return nan_max(a, b); });
    case VBinary::minimum: return fn([](__m512 a, __m512 b) { return nan_min(a, b); });
  }
}

/// dx = f(v, dy), v the forward input or output as documented in the header.
template <class Fn>
void with_unary_grad(VUnary op, Fn&& fn) {
  switch (op) {
    case VUnary::neg: return fn([](__m512, __m512 g) { return neg_ps(g); });
    case VUnary::abs:
      return fn([](__m512 x, __m512 g) {
        const __m512 zero = _mm512_setzero_ps();
        __m512 s = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ), zero);
        s = _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ), _mm512_set1_ps(1.0f));
        s = _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), _mm512_set1_ps(-1.0f));
        return _mm512_mul_ps(s, g);
      });
    case VUnary::exp: return fn([](__m512 y, __m512 g) { return _mm512_mul_ps(g, y); });
    case VUnary::log: return fn([](__m512 x, __m512 g) { return _mm512_div_ps(g, x); });
    case VUnary::sqrt:
      return fn([](__m512 y, __m512 g) { return _mm512_div_ps(g, _mm512_add_ps(y, y)); });
    case VUnary::rsqrt:
      return fn([](__m512 y, __m512 g) {
        const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), y), y);
        return _mm512_mul_ps(g, _mm512_mul_ps(t, y));
      });
    case VUnary::reciprocal:
      return fn([](__m512 y, __m512 g) { return _mm512_mul_ps(g, neg_ps(_mm512_mul_ps(y, y))); });
    case VUnary::square:
      return fn([](__m512 x, __m512 g) { return _mm512_mul_ps(g, _mm512_add_ps(x, x)); });
    case VUnary::relu:
      return fn([](__m512 x, __m512 g) {
        return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), g);
      });
    case VUnary::gelu:  // Phi(x) + x phi(x)
      return fn([](__m512 x, __m512 g) {
        const __m512 z = _mm512_mul_ps(neg_ps(x), _mm512_set1_ps(0.70710678118654752f));
        const __m512 cdf = _mm512_mul_ps(_mm512_set1_ps(0.5f), erfc_ps(z));
        const __m512 e = exp_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), x), x));
        const __m512 pdf = _mm512_mul_ps(_mm512_set1_ps(0.39894228040143268f), e);
        return _mm512_mul_ps(g, _mm512_add_ps(cdf, _mm512_mul_ps(x, pdf)));
      });
    case VUnary::tanh:
      return fn([](__m512 y, __m512 g) {
        return _mm512_mul_ps(g, _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(y, y)));
      });
    case VUnary::sigmoid:
      return fn([](__m512 y, __m512 g) {
        return _mm512_mul_ps(g, _mm512_mul_ps(y, _mm512_sub_ps(_mm512_set1_ps(1.0f), y)));
      });
  }
}

}  // namespace

bool unary(VUnary op, const void* in, int in_dtype, void* out, int out_dtype, std::int64_t n) {
  return with_dtype_pair(in_dtype, out_dtype, [&](auto ti, auto to) {
    with_unary(op, [&](auto f) { map1<decltype(ti)::value, decltype(to)::value>(in, out, n, f); });
  });
}

bool binary_vv(VBinary op, const void* a, const void* b, int dtype, void* out, int out_dtype,
               std::int64_t n) {
  return with_dtype_pair(dtype, out_dtype, [&](auto ti, auto to) {
    with_binary(op, [&](auto f) {
      map2<decltype(ti)::value, decltype(to)::value>(a, b, out, n, f);
    });
  });
}

bool binary_vs(VBinary op, const void* a, int dtype, float s, bool scalar_left, void* out,
               int out_dtype, std::int64_t n) {
  const __m512 sv = _mm512_set1_ps(s);
  return with_dtype_pair(dtype, out_dtype, [&](auto ti, auto to) {
    constexpr int DI = decltype(ti)::value, DO = decltype(to)::value;
    with_binary(op, [&](auto f) {
      if (scalar_left) {
        map1<DI, DO>(a, out, n, [&](__m512 x) { return f(sv, x); });
      } else {
        map1<DI, DO>(a, out, n, [&](__m512 x) { return f(x, sv); });
      }
    });
  });
}

bool affine(const void* in, int in_dtype, void* out, int out_dtype, std::int64_t n, float alpha,
            float beta) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  return with_dtype_pair(in_dtype, out_dtype, [&](auto ti, auto to) {
    map1<decltype(ti)::value, decltype(to)::value>(
        in, out, n, [&](__m512 x) { return _mm512_add_ps(_mm512_mul_ps(va, x), vb); });
  });
}

bool unary_backward(VUnary op, const void* v, const void* dy, int dtype, void* dx, int dx_dtype,
                    std::int64_t n) {
  return with_dtype_pair(dtype, dx_dtype, [&](auto ti, auto to) {
    with_unary_grad(op, [&](auto f) {
      map2<decltype(ti)::value, decltype(to)::value>(v, dy, dx, n, f);
    });
  });
}

void fill(void* out, int dtype, std::int64_t n, float value) {
  const __m512 v = _mm512_set1_ps(value);
  with_dtype(dtype, [&](auto t) {
    constexpr int DT = decltype(t)::value;
    std::int64_t i = 0;
    for (; i + 16 <= n; i += 16) store<DT>(out, i, v);
    if (i < n) store<DT>(out, i, v, tail_mask(n - i));
  });
}

}  // namespace mixprec::kernels::avx512
