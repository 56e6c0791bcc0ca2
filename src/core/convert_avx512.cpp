// AVX-512F/BW/VL + F16C conversion kernels, 16 lanes. Compiled with AVX-512 flags: this file
// includes only intrinsics, C headers and the plain declarations of convert_isa.h (ODR safety),
// and is entered only after run-time dispatch (isa_allowed(Isa::avx512)).

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

constexpr int kF16Rounding = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

/// Lane mask of the first `count` (<= 16) lanes.
__mmask16 first_lanes(std::size_t count) {
  return static_cast<__mmask16>((1u << count) - 1u);
}

/// NaN lanes of fp32 bit patterns (magnitude above the Inf pattern).
__mmask16 nan_lanes(__m512i x) {
  const __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  return _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
}

/// f32 bit patterns -> bf16 patterns (low half of each lane), exactly as f32_to_bf16_bits:
/// add 0x7fff plus the kept lsb and truncate; a NaN keeps its top bits and gets the quiet bit.
__m512i bf16_rne(__m512i x) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __m512i quiet = _mm512_or_si512(x, _mm512_set1_epi32(0x00400000));
  return _mm512_srli_epi32(_mm512_mask_blend_epi32(nan_lanes(x), rounded, quiet), 16);
}

/// Stochastic f32 -> bf16 (see f32_to_bf16_bits_stochastic): add the top 16 random bits below
/// the kept bits and truncate; NaN as in round-to-nearest-even.
__m512i bf16_stochastic(__m512i x, __m512i random) {
  const __m512i sum = _mm512_add_epi32(x, _mm512_srli_epi32(random, 16));
  const __m512i quiet = _mm512_or_si512(x, _mm512_set1_epi32(0x00400000));
  return _mm512_srli_epi32(_mm512_mask_blend_epi32(nan_lanes(x), sum, quiet), 16);
}

/// Stochastic f32 -> f16 (see f32_to_f16_bits_stochastic), lane by lane as the scalar code:
/// truncate the magnitude to f16, and add 1 iff random + floor(dropped fraction * 2^32)
/// carries out of 32 bits. Results in the low half of each lane.
__m512i f16_stochastic(__m512i x, __m512i random) {
  const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x8000));
  // Normal f16 range (a >= 2^-14): 13 dropped bits.
  const __m512i rebiased = _mm512_sub_epi32(a, _mm512_set1_epi32(112 << 23));  // 127 -> 15
  const __m512i kept_normal = _mm512_srli_epi32(rebiased, 13);
  const __m512i fraction_normal = _mm512_slli_epi32(a, 19);
  // Subnormal f16 range: (m >> s) units of 2^-24, s = 126 - max(e, 1) in 14..125. Shift counts
  // of 32 or more give 0 in vpsrlvd/vpsllvd, which is exactly what the scalar code computes.
  const __m512i e = _mm512_srli_epi32(a, 23);
  const __mmask16 has_implicit = _mm512_test_epi32_mask(a, _mm512_set1_epi32(0x7f800000));
  const __m512i mantissa = _mm512_and_si512(a, _mm512_set1_epi32(0x7fffff));
  const __m512i m =
      _mm512_mask_or_epi32(mantissa, has_implicit, mantissa, _mm512_set1_epi32(0x800000));
  const __m512i s =
      _mm512_sub_epi32(_mm512_set1_epi32(126), _mm512_max_epu32(e, _mm512_set1_epi32(1)));
  const __m512i kept_sub = _mm512_srlv_epi32(m, s);
  const __m512i rest = _mm512_andnot_si512(_mm512_sllv_epi32(_mm512_set1_epi32(-1), s), m);
  // floor(rest / 2^s * 2^32): a left shift by 32 - s when s <= 32, a right shift by s - 32 when
  // s >= 32; the other shift's count wraps to >= 32 and contributes 0.
  const __m512i fraction_sub =
      _mm512_or_si512(_mm512_sllv_epi32(rest, _mm512_sub_epi32(_mm512_set1_epi32(32), s)),
                      _mm512_srlv_epi32(rest, _mm512_sub_epi32(s, _mm512_set1_epi32(32))));
  const __mmask16 normal = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x38800000));
  __m512i kept = _mm512_mask_blend_epi32(normal, kept_sub, kept_normal);
  const __m512i fraction = _mm512_mask_blend_epi32(normal, fraction_sub, fraction_normal);
  const __mmask16 carry =
      _mm512_cmplt_epu32_mask(_mm512_add_epi32(random, fraction), random);
  kept = _mm512_mask_add_epi32(kept, carry, kept, _mm512_set1_epi32(1));
  // From 2^16 up (and Inf) the result is Inf; NaN is quiet with the top payload bits, as RNE.
  const __mmask16 huge = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x47800000));
  kept = _mm512_mask_mov_epi32(kept, huge, _mm512_set1_epi32(0x7c00));
  const __m512i nan_bits = _mm512_or_si512(
      _mm512_set1_epi32(0x7e00),
      _mm512_and_si512(_mm512_srli_epi32(a, 13), _mm512_set1_epi32(0x3ff)));
  kept = _mm512_mask_mov_epi32(kept, nan_lanes(x), nan_bits);
  return _mm512_or_si512(sign, kept);
}

/// 32x32 -> 64-bit products of every lane with a broadcast multiplier, split into hi and lo.
void mulhilo(__m512i a, __m512i multiplier, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, multiplier);                         // lanes 0,2,..
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), multiplier);  // lanes 1,3,..
  constexpr __mmask16 kOdd = 0xAAAA;
  hi = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(kOdd, even, _mm512_slli_epi64(odd, 32));
}

/// The 64 words of Philox4x32-10 blocks first_block .. first_block+15 of stream `seed`, in
/// element order: out[j] holds words 16j .. 16j+15 (block first_block + w/4, word w%4).
void philox64(std::uint64_t seed, std::uint64_t first_block, __m512i out[4]) {
  // Structure of arrays: lane k of c0..c3 is word 0..3 of block first_block + k.
  const auto lo = static_cast<std::uint32_t>(first_block);
  const auto hi = static_cast<std::uint32_t>(first_block >> 32);
  const __m512i base_lo = _mm512_set1_epi32(static_cast<int>(lo));
  const __m512i base_hi = _mm512_set1_epi32(static_cast<int>(hi));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i c0 = _mm512_add_epi32(base_lo, lane);
  const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, base_lo);
  __m512i c1 = _mm512_mask_add_epi32(base_hi, carry, base_hi, _mm512_set1_epi32(1));
  __m512i c2 = _mm512_setzero_si512();
  __m512i c3 = _mm512_setzero_si512();
  std::uint32_t k0 = static_cast<std::uint32_t>(seed);
  std::uint32_t k1 = static_cast<std::uint32_t>(seed >> 32);
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    __m512i hi0, lo0, hi1, lo1;
    mulhilo(c0, m0, hi0, lo0);
    mulhilo(c2, m1, hi1, lo1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
  }
  // Transpose to element order. Within each 128-bit chunk c, 4x4 transpose of 32-bit words:
  // u_j chunk c = the 4 words of block 4c + j.
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1);
  const __m512i t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3);
  const __m512i t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2);
  const __m512i u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3);
  const __m512i u3 = _mm512_unpackhi_epi64(t1, t3);
  // Then a 4x4 transpose of 128-bit chunks: out[m] = chunk m of u0, u1, u2, u3.
  const __m512i a = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i b = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i c = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i d = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));
  out[0] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  out[1] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  out[2] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0));
  out[3] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1));
}

}  // namespace

void f32_to_bf16_avx512(const float* src, std::uint16_t* dst, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(src + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(bf16_rne(x)));
  }
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    const __m512i x = _mm512_maskz_loadu_epi32(m, src + i);
    _mm512_mask_cvtepi32_storeu_epi16(dst + i, m, bf16_rne(x));
  }
}

void bf16_to_f32_avx512(const std::uint16_t* src, float* dst, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
    _mm512_mask_storeu_epi32(dst + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

void f32_to_f16_avx512(const float* src, std::uint16_t* dst, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kF16Rounding);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), kF16Rounding);
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

void f16_to_f32_avx512(const std::uint16_t* src, float* dst, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

void philox_bits_avx512(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out,
                        std::size_t n) noexcept {
  __m512i r[4];
  for (std::size_t i = 0; i < n; i += 64) {
    philox64(seed, (offset + i) / 4, r);
    for (std::size_t j = 0; j < 4 && i + 16 * j < n; ++j) {
      const std::size_t left = n - i - 16 * j;
      _mm512_mask_storeu_epi32(out + i + 16 * j, first_lanes(left < 16 ? left : 16), r[j]);
    }
  }
}

namespace {

/// Stochastic rounding of src[0, n) with random_bits(seed, offset + i), offset % 4 == 0:
/// round(x, random) maps 16 fp32 patterns to 16-bit results in the low half of each lane.
template <class Round>
void stochastic(const float* src, std::uint16_t* dst, std::size_t n, std::uint64_t seed,
                std::uint64_t offset, Round round) {
  __m512i r[4];
  for (std::size_t i = 0; i < n; i += 64) {
    philox64(seed, (offset + i) / 4, r);
    for (std::size_t j = 0; j < 4 && i + 16 * j < n; ++j) {
      const std::size_t at = i + 16 * j;
      const std::size_t left = n - at;
      if (left >= 16) {
        const __m512i x = _mm512_loadu_si512(src + at);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at),
                            _mm512_cvtepi32_epi16(round(x, r[j])));
      } else {
        const __mmask16 m = first_lanes(left);
        const __m512i x = _mm512_maskz_loadu_epi32(m, src + at);
        _mm512_mask_cvtepi32_storeu_epi16(dst + at, m, round(x, r[j]));
      }
    }
  }
}

}  // namespace

void f32_to_bf16_stochastic_avx512(const float* src, std::uint16_t* dst, std::size_t n,
                                   std::uint64_t seed, std::uint64_t offset) noexcept {
  stochastic(src, dst, n, seed, offset, [](__m512i x, __m512i r) { return bf16_stochastic(x, r); });
}

void f32_to_f16_stochastic_avx512(const float* src, std::uint16_t* dst, std::size_t n,
                                  std::uint64_t seed, std::uint64_t offset) noexcept {
  stochastic(src, dst, n, seed, offset, [](__m512i x, __m512i r) { return f16_stochastic(x, r); });
}

}  // namespace mixprec::detail
