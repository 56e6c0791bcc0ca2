// vdpbf16ps tile products of attention (attention_bf16_pairs.h). The kernel is compiled for
// AVX512_BF16 through a target attribute and only called after available() has checked the
// real CPU, so the rest of the library keeps its baseline ISA.
#include "kernels/cpu/attention_bf16_pairs.h"

#include <algorithm>
#include <cstring>

#include "mixprec/core/cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MIXPREC_BF16_PAIRS 1
#else
#define MIXPREC_BF16_PAIRS 0
#endif

namespace mixprec::kernels::cpu::attn_bf16 {
namespace {

/// Word p of a bf16 row of width elements: elements 2p and 2p + 1, or 2p alone (high half 0)
/// at an odd width's end, never reading past the row.
std::uint32_t pair_word(const std::uint16_t* row, std::int64_t p, std::int64_t width) {
  if (2 * p + 1 < width) {
    std::uint32_t w;
    std::memcpy(&w, row + 2 * p, sizeof w);
    return w;
  }
  return row[2 * p];
}

#if MIXPREC_BF16_PAIRS
/// Rows of A per block and vectors of B per row: 8 x 2 sums in 16 of the 32 registers.
constexpr std::int64_t kRows = 8;

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void scores_avx512bf16(
    const std::uint16_t* a, std::int64_t lda, std::int64_t m, std::int64_t kdim,
    const std::uint32_t* b, std::int64_t ldb, std::int64_t n, float scale, float* c,
    std::int64_t ldc) {
  const std::int64_t pairs = (kdim + 1) / 2;
  const __m512 vs = _mm512_set1_ps(scale);
  for (std::int64_t r0 = 0; r0 < m; r0 += kRows) {
    const std::int64_t nr = std::min(kRows, m - r0);
    const std::uint16_t* ar[kRows];
    for (std::int64_t rr = 0; rr < kRows; ++rr) ar[rr] = a + std::min(r0 + rr, m - 1) * lda;
    for (std::int64_t j0 = 0; j0 < n; j0 += 32) {
      const bool two = j0 + 32 <= n;  // else one vector (n is a multiple of 16)
      __m512 s0[kRows], s1[kRows];
      for (std::int64_t rr = 0; rr < kRows; ++rr) s0[rr] = s1[rr] = _mm512_setzero_ps();
      const std::uint32_t* row = b + j0;
      // One pair of k per step: A's word broadcast against 16 words (columns) of B's pair
      // row. (No lambdas here: they would not inherit the target attribute.)
      const std::int64_t full = kdim / 2;  // words with both halves; an odd kdim adds one
      for (std::int64_t p = 0; p < pairs; ++p, row += ldb) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(row);
        const __m512bh b1 = two ? (__m512bh)_mm512_loadu_si512(row + 16) : b0;
        for (std::int64_t rr = 0; rr < kRows; ++rr) {
          std::uint32_t word = ar[rr][2 * p];  // the odd kdim's last element, alone
          if (p < full) std::memcpy(&word, ar[rr] + 2 * p, sizeof word);
          const __m512bh w = (__m512bh)_mm512_set1_epi32(static_cast<int>(word));
          s0[rr] = _mm512_dpbf16_ps(s0[rr], w, b0);
          s1[rr] = _mm512_dpbf16_ps(s1[rr], w, b1);
        }
      }
      for (std::int64_t rr = 0; rr < nr; ++rr) {
        float* out = c + (r0 + rr) * ldc + j0;
        _mm512_storeu_ps(out, _mm512_mul_ps(s0[rr], vs));
        if (two) _mm512_storeu_ps(out + 16, _mm512_mul_ps(s1[rr], vs));
      }
    }
  }
}
#endif

}  // namespace

bool available() {
#if MIXPREC_BF16_PAIRS
  static const bool hardware = hardware_cpu_features().avx512_bf16 &&
                               hardware_cpu_features().avx512bw && hardware_cpu_features().avx512vl;
  return hardware && isa_allowed(Isa::avx512_bf16);
#else
  return false;
#endif
}

void pack_pairs_transposed(const std::uint16_t* src, std::int64_t rows, std::int64_t width,
                           std::int64_t stride, std::uint32_t* dst, std::int64_t ldt) {
  const std::int64_t pairs = (width + 1) / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint16_t* row = src + r * stride;
    for (std::int64_t p = 0; p < pairs; ++p) dst[p * ldt + r] = pair_word(row, p, width);
  }
  for (std::int64_t p = 0; p < pairs; ++p) std::fill(dst + p * ldt + rows, dst + (p + 1) * ldt, 0u);
}

void scores(const std::uint16_t* a, std::int64_t lda, std::int64_t m, std::int64_t kdim,
            const std::uint32_t* b, std::int64_t ldb, std::int64_t n, float scale, float* c,
            std::int64_t ldc) {
#if MIXPREC_BF16_PAIRS
  if (m > 0 && n > 0) scores_avx512bf16(a, lda, m, kdim, b, ldb, n, scale, c, ldc);
#else
  (void)a, (void)lda, (void)m, (void)kdim, (void)b, (void)ldb, (void)n, (void)scale, (void)c,
      (void)ldc;
#endif
}

}  // namespace mixprec::kernels::cpu::attn_bf16
