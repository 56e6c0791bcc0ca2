// AVX512-BF16 f32 -> bf16 kernel. Compiled with -mavx512bf16: this file includes only
// intrinsics, C headers and the plain declarations of convert_isa.h (ODR safety), and is entered
// only after run-time dispatch (max_isa() >= Isa::avx512_bf16).
//
// Why it matches f32_to_bf16_bits bit for bit (Intel SDM, VCVTNEPS2BF16, helper
// "convert_fp32_to_bfloat16"):
//   normal x: temp = x + 0x7fff + x[16], result temp[31:16]  -- the same integer add as half.h,
//             including the carry into the exponent and the overflow of values near max to Inf;
//   Inf:      x[31:16]                                       -- half.h adds 0x7fff: no carry;
//   NaN:      x[31:16] with bit 6 set                        -- half.h: (x >> 16) | 0x0040;
//   zero:     signed zero                                    -- same;
//   denormal: signed zero, whatever MXCSR says (DAZ/FTZ are built in, MXCSR is not read)
//             -- DIFFERS: half.h rounds fp32 denormals to bf16 denormals (or to the smallest
//             normal), as GPUs and the scalar path do. Those lanes are redone below with the
//             integer formula. Outputs can be bf16 denormals only for denormal inputs (bf16 and
//             fp32 share the exponent range), so the instruction's output flush never matters.

// GCC 12 warns inside AVX-512 intrinsics about their deliberately undefined `__Y = __Y`
// temporaries once they are inlined (GCC bug 105593): a false positive, silenced here.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/convert_isa.h"

namespace mixprec::detail {
namespace {

/// Lanes holding an fp32 denormal (exponent field zero, mantissa non-zero).
__mmask16 denormal_lanes(__m512i x) {
  return _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000)) &
         _mm512_test_epi32_mask(x, _mm512_set1_epi32(0x007fffff));
}

/// Round-to-nearest-even by integer add, for non-NaN lanes (used on denormal lanes only).
__m256i bf16_rne_finite(__m512i x) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

}  // namespace

void f32_to_bf16_avx512bf16(const float* src, std::uint16_t* dst, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i);
    const __m512 hi = _mm512_loadu_ps(src + i + 16);
    // Words 0..15 come from the second operand, 16..31 from the first.
    __m512i h = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    const __mmask16 dlo = denormal_lanes(_mm512_castps_si512(lo));
    const __mmask16 dhi = denormal_lanes(_mm512_castps_si512(hi));
    if ((dlo | dhi) != 0) [[unlikely]] {
      const __m512i fixed = _mm512_inserti64x4(
          _mm512_castsi256_si512(bf16_rne_finite(_mm512_castps_si512(lo))),
          bf16_rne_finite(_mm512_castps_si512(hi)), 1);
      const __mmask32 lanes = (static_cast<__mmask32>(dhi) << 16) | dlo;
      h = _mm512_mask_blend_epi16(lanes, h, fixed);
    }
    _mm512_storeu_si512(dst + i, h);
  }
  for (; i < n; i += 16) {
    const std::size_t count = n - i < 16 ? n - i : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << count) - 1u);
    const __m512 x = _mm512_maskz_loadu_ps(m, src + i);
    __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
    const __mmask16 d = denormal_lanes(_mm512_castps_si512(x));
    if (d != 0) [[unlikely]] {
      h = _mm256_mask_blend_epi16(d, h, bf16_rne_finite(_mm512_castps_si512(x)));
    }
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

}  // namespace mixprec::detail
