#pragma once
/// AVX-512 building blocks shared by the *_avx512.cpp kernel files, and ONLY by them: dtype loads
/// and stores (bf16 rounding bit-identical to half.h's f32_to_bf16_bits, f16 through F16C) and
/// vectorised exp/log/tanh/erfc. Everything here lives in an anonymous namespace, so every
/// function has internal linkage: the linker can never pick one of these AVX-512 bodies for a
/// scalar caller (the ODR hazard the ISA-file rule exists for). Including this header from a
/// file compiled without AVX-512 is a compile error, by design.
///
/// Measured accuracy: max error in f32 ulps of the exact result (std:: functions in double),
/// over every 97th float bit pattern of the range (~22M points each); ulps of subnormal results
/// are 2^-149. tests/kernels/test_elementwise.cpp (ElementwiseVecMath) re-checks these bounds.
///   exp_ps   [-104, 89]      1.00 ulp
///   log_ps   (0, FLT_MAX]    0.78 ulp
///   tanh_ps  all floats      1.27 ulp
///   erfc_ps  [-10, 10]       4.95 ulp (worst near |x| = 1.9, where 6 roundings stack up)
///   gelu = (x/2) erfc(-x/sqrt2) on [-14, 14]: 5.2 ulp (subnormal results), 4.0 elsewhere
#ifndef __AVX512F__
#error "vecmath_avx512.h may only be included from *_avx512.cpp files (compiled with -mavx512f)"
#endif

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() (a self-initialised variable) as the
// unused merge operand; with sanitizer instrumentation GCC then reports -Wmaybe-uninitialized
// inside the intrinsics header (GCC bug 105593, fixed in GCC 13). Silenced for the header's
// own lines only: the pop restores the warning for our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

namespace mixprec::kernels::avx512 {
namespace {

/// dtype codes: the underlying values of mixprec::DType (checked by static_asserts in the
/// dispatching files, which may include dtype.h; this header may not).
constexpr int kF32 = 0;
constexpr int kBF16 = 1;
constexpr int kF16 = 2;

/// A compile-time int as a value, so a generic lambda can receive a dtype code as a type.
template <int V>
struct IntTag {
  static constexpr int value = V;
};

/// Calls body(IntTag<in>, IntTag<out>) for the dtype pairs the vector kernels cover (out equal
/// to in, or f32) and returns true; returns false for any other pair.
template <class Body>
inline bool with_dtype_pair(int in, int out, Body&& body) {
  if (out != in && out != kF32) return false;
  switch (in * 3 + out) {
    case kF32 * 3 + kF32: body(IntTag<kF32>{}, IntTag<kF32>{}); return true;
    case kBF16 * 3 + kBF16: body(IntTag<kBF16>{}, IntTag<kBF16>{}); return true;
    case kBF16 * 3 + kF32: body(IntTag<kBF16>{}, IntTag<kF32>{}); return true;
    case kF16 * 3 + kF16: body(IntTag<kF16>{}, IntTag<kF16>{}); return true;
    case kF16 * 3 + kF32: body(IntTag<kF16>{}, IntTag<kF32>{}); return true;
    default: return false;
  }
}

/// Calls body(IntTag<dtype>).
template <class Body>
inline void with_dtype(int dtype, Body&& body) {
  if (dtype == kF32) body(IntTag<kF32>{});
  else if (dtype == kBF16) body(IntTag<kBF16>{});
  else body(IntTag<kF16>{});
}

/// Mask of the first `count` lanes (count in [0, 16]).
inline __mmask16 tail_mask(std::int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff)
                     : static_cast<__mmask16>((1u << count) - 1u);
}

/// f32 -> bf16 bits, round to nearest even, NaN -> quiet NaN keeping sign and top payload:
/// the vector form of half.h's f32_to_bf16_bits, bit for bit.
inline __m256i f32_to_bf16_bits(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
  r = _mm512_srli_epi32(r, 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  r = _mm512_mask_mov_epi32(r, nan, quiet);
  return _mm512_cvtepi32_epi16(r);
}

inline __m512 bf16_bits_to_f32(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// Loads 16 elements base[i..i+16) of dtype DT as f32.
template <int DT>
inline __m512 load(const void* base, std::int64_t i) {
  if constexpr (DT == kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + i);
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const std::uint16_t*>(base) + i));
    if constexpr (DT == kBF16) return bf16_bits_to_f32(h);
    else return _mm512_cvtph_ps(h);
  }
}

/// Loads the lanes of m from base[i..], zero elsewhere (never touches memory outside m).
template <int DT>
inline __m512 load(const void* base, std::int64_t i, __mmask16 m) {
  if constexpr (DT == kF32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(base) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const std::uint16_t*>(base) + i);
    if constexpr (DT == kBF16) return bf16_bits_to_f32(h);
    else return _mm512_cvtph_ps(h);
  }
}

/// Stores 16 f32 values to base[i..i+16) in dtype DT, rounding to nearest even.
template <int DT>
inline void store(void* base, std::int64_t i, __m512 v) {
  if constexpr (DT == kF32) {
    _mm512_storeu_ps(static_cast<float*>(base) + i, v);
  } else {
    __m256i h;
    if constexpr (DT == kBF16) h = f32_to_bf16_bits(v);
    else h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<std::uint16_t*>(base) + i), h);
  }
}

/// Stores the lanes of m only.
template <int DT>
inline void store(void* base, std::int64_t i, __m512 v, __mmask16 m) {
  if constexpr (DT == kF32) {
    _mm512_mask_storeu_ps(static_cast<float*>(base) + i, m, v);
  } else {
    __m256i h;
    if constexpr (DT == kBF16) h = f32_to_bf16_bits(v);
    else h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(static_cast<std::uint16_t*>(base) + i, m, h);
  }
}

inline __m512 abs_ps(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

/// NaN-propagating max, the same selection as the scalar spec: NaN a -> a, else NaN b -> b,
/// else a > b ? a : b (vmaxps alone would drop a NaN in its first operand).
inline __m512 nan_max(__m512 a, __m512 b) {
  return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}
/// NaN-propagating min: NaN a -> a, else NaN b -> b, else a < b ? a : b.
inline __m512 nan_min(__m512 a, __m512 b) {
  return _mm512_mask_mov_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}

/// e^x. Cephes expf: n = round(x / ln2), r = x - n ln2 in two FMA steps, a degree-7 polynomial
/// on |r| <= ln2/2, then vscalefps applies 2^n, which also rounds overflow to Inf and produces
/// correctly rounded subnormals. NaN propagates (the clamps keep NaN: min/max return the
/// second operand when either is NaN).
inline __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

/// Natural log. Cephes logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)) via vgetmantps/vgetexpps
/// (exact, subnormals included), a degree-9 polynomial in m - 1, e ln2 added in two parts.
/// log(0) = -Inf, log(x<0) = NaN, log(+Inf) = +Inf, NaN propagates.
inline __m512 log_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  __m512 e = _mm512_getexp_ps(x);
  const __mmask16 big = _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.41421356237f), _CMP_GT_OQ);
  m = _mm512_mask_mul_ps(m, big, m, _mm512_set1_ps(0.5f));
  e = _mm512_mask_add_ps(e, big, e, one);
  const __m512 f = _mm512_sub_ps(m, one);
  const __m512 z = _mm512_mul_ps(f, f);
  __m512 y = _mm512_set1_ps(7.0376836292e-2f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.1514610310e-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.1676998740e-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.2420140846e-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.4249322787e-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.6668057665e-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.0000714765e-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-2.4999993993e-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(3.3333331174e-1f));
  y = _mm512_mul_ps(_mm512_mul_ps(y, f), z);
  y = _mm512_fmadd_ps(e, _mm512_set1_ps(-2.12194440e-4f), y);
  y = _mm512_fnmadd_ps(_mm512_set1_ps(0.5f), z, y);
  __m512 r = _mm512_add_ps(f, y);
  r = _mm512_fmadd_ps(e, _mm512_set1_ps(0.693359375f), r);
  const __m512 zero = _mm512_setzero_ps();
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ),
                         _mm512_set1_ps(-__builtin_inff()));
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ),
                         _mm512_set1_ps(__builtin_nanf("")));
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_set1_ps(__builtin_inff()), _CMP_EQ_OQ),
                         x);
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/// tanh. Cephes tanhf: odd polynomial for |x| < 0.625, else 1 - 2 / (e^{2|x|} + 1) with the
/// sign of x (e^{2|x|} = Inf gives exactly +-1). NaN takes the second branch and propagates.
inline __m512 tanh_ps(__m512 x) {
  const __m512 a = abs_ps(x);
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(2.06390887954e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
  const __m512 e = exp_ps(_mm512_add_ps(a, a));
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big), sign));
  return _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.625f), _CMP_LT_OQ),
                            small);
}

/// erfc, accurate in relative terms also where erfc is tiny (the tail matters for gelu of
/// negative inputs). For a = |x| < 0.5: 1 - a P(a^2), P a degree-4 fit of erf(a)/a. Else
/// exp(-a^2) S(t) / (a+2) with t = (a-2)/(a+2) and S a degree-9 fit of erfc(a) e^{a^2} (a+2)
/// on [0.5, 10.2] (Chebyshev interpolation in mpmath: relative error 4e-9, 8e-8 once evaluated
/// in f32; S stays in [0.6, 1.6], so its rounding is relative to its size); a^2 is split
/// exactly into hi + lo with an FMA so exp(-a^2) = exp(-hi)(1 - lo) keeps full precision.
/// x < 0 uses erfc(x) = 2 - erfc(-x). NaN propagates.
inline __m512 erfc_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 a = abs_ps(x);
  const __m512 u = _mm512_mul_ps(a, a);
  __m512 p = _mm512_set1_ps(4.699867395e-03f);
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(-2.674914541e-02f));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(1.128271388e-01f));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(-3.761260400e-01f));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(1.128379165e+00f));
  const __m512 small = _mm512_fnmadd_ps(a, p, one);

  // Beyond 10.2, exp(-a^2) is 0 in f32 anyway; clamping also keeps Inf out of hi - lo.
  const __m512 ac = _mm512_min_ps(_mm512_set1_ps(10.2f), a);
  const __m512 two = _mm512_set1_ps(2.0f);
  const __m512 inv = _mm512_div_ps(one, _mm512_add_ps(ac, two));
  const __m512 t = _mm512_mul_ps(_mm512_sub_ps(ac, two), inv);
  __m512 r = _mm512_set1_ps(1.029530540e-04f);
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-5.377045600e-04f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-8.799600182e-04f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(3.049493534e-03f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(6.489442196e-03f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-2.150498144e-02f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-3.644317016e-02f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(2.794718146e-01f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-6.871606708e-01f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(1.021582723e+00f));
  const __m512 hi = _mm512_mul_ps(ac, ac);
  const __m512 lo = _mm512_fmsub_ps(ac, ac, hi);  // ac*ac - hi exactly
  const __m512 ex = _mm512_mul_ps(exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), hi)),
                                  _mm512_sub_ps(one, lo));
  r = _mm512_mul_ps(r, inv);
  __m512 big = _mm512_mul_ps(ex, r);
  big = _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), x);  // NaN stays NaN
  __m512 res = _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.5f), _CMP_LT_OQ),
                                  small);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_sub_ps(res, neg, two, res);
}

/// Sum of the 16 lanes in a fixed order (so results are deterministic).
inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

}  // namespace
}  // namespace mixprec::kernels::avx512
