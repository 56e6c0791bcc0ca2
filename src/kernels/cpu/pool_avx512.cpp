// 2x2 stride-2 max pooling, 16 outputs per step: the two input rows are loaded 32 elements at a
// time, widened to f32, split into even and odd columns, and the reference's update rule (take
// v if the best so far is not NaN and v is greater or NaN) runs as mask operations in the
// reference's visiting order, so the same element wins.
#include "kernels/cpu/pool_avx512.h"

#include <immintrin.h>

namespace mixprec::kernels::avx512 {
namespace {

// 32 consecutive elements (mask: which of them to load) widened to f32, as two vectors.
inline void load32(const void* p, int dtype, __mmask32 m, __m512& lo, __m512& hi) {
  const auto mlo = static_cast<__mmask16>(m), mhi = static_cast<__mmask16>(m >> 16);
  if (dtype == 0) {
    const float* f = static_cast<const float*>(p);
    lo = _mm512_maskz_loadu_ps(mlo, f);
    hi = _mm512_maskz_loadu_ps(mhi, f + 16);
    return;
  }
  const auto* h = static_cast<const std::uint16_t*>(p);
  const __m256i a = _mm256_maskz_loadu_epi16(mlo, h), b = _mm256_maskz_loadu_epi16(mhi, h + 16);
  if (dtype == 1) {  // bf16: the upper half of an f32
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(a), 16));
    hi = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  } else {
    lo = _mm512_cvtph_ps(a);
    hi = _mm512_cvtph_ps(b);
  }
}

// The update rule on 16 lanes: take v where best is not NaN and (v > best or v is NaN).
inline void take(__m512 v, __m512i vi, __m512& best, __m512i& bi) {
  const __mmask16 ordered = _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q);
  const __mmask16 wins = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __mmask16 t = ordered & wins;
  best = _mm512_mask_blend_ps(t, best, v);
  bi = _mm512_mask_blend_epi32(t, bi, vi);
}

}  // namespace

void max_pool2x2_row(const void* row0, const void* row1, int dtype, std::int64_t w,
                     std::int32_t row0_index, std::int32_t* idx) {
  const std::int64_t wo = w / 2;
  const std::size_t esize = dtype == 0 ? 4 : 2;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const auto w32 = static_cast<std::int32_t>(w);
  for (std::int64_t ox = 0; ox < wo; ox += 16) {
    const std::int64_t n = wo - ox < 16 ? wo - ox : 16;
    const __mmask32 m = n == 16 ? ~__mmask32{0} : (__mmask32{1} << (2 * n)) - 1;
    const std::size_t offset = static_cast<std::size_t>(2 * ox) * esize;
    __m512 a_lo, a_hi, b_lo, b_hi;
    load32(static_cast<const char*>(row0) + offset, dtype, m, a_lo, a_hi);
    load32(static_cast<const char*>(row1) + offset, dtype, m, b_lo, b_hi);
    // Plane index of (0,0) of each window: row0_index + 2 * (ox + lane).
    const __m512i i00 = _mm512_add_epi32(_mm512_set1_epi32(row0_index + static_cast<std::int32_t>(2 * ox)), even);
    __m512 best = _mm512_permutex2var_ps(a_lo, even, a_hi);
    __m512i bi = i00;
    take(_mm512_permutex2var_ps(a_lo, odd, a_hi), _mm512_add_epi32(i00, _mm512_set1_epi32(1)), best, bi);
    take(_mm512_permutex2var_ps(b_lo, even, b_hi), _mm512_add_epi32(i00, _mm512_set1_epi32(w32)), best, bi);
    take(_mm512_permutex2var_ps(b_lo, odd, b_hi), _mm512_add_epi32(i00, _mm512_set1_epi32(w32 + 1)), best, bi);
    _mm512_mask_storeu_epi32(idx + ox, static_cast<__mmask16>((1u << n) - 1), bi);
  }
}

}  // namespace mixprec::kernels::avx512
