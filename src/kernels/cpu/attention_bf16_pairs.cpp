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

/// A's words for the pair kernel: row(r) finds row r once per block, word(row, p) reads its
/// word p. Plain scalar reads, so they inline into the kernel whatever its target.
struct Bf16Rows {  // bf16 rows where they lie (the score products' left operand)
  using Row = const std::uint16_t*;
  const std::uint16_t* a;
  std::int64_t lda, kdim;
  Row row(std::int64_t r) const { return a + r * lda; }
  std::uint32_t word(Row row, std::int64_t p) const { return pair_word(row, p, kdim); }
};
struct PackedWords {  // words packed by pack_f32_row_pairs or pack_f32_pairs_in_rows
  using Row = const std::uint32_t*;
  const std::uint32_t* a;
  std::int64_t a_row, a_pair;
  Row row(std::int64_t r) const { return a + r * a_row; }
  std::uint32_t word(Row row, std::int64_t p) const { return row[p * a_pair]; }
};

/// C[r][j] = scale * sum, or C[r][j] += sum (kAccumulate: each element starts from its value),
/// the sum over p < pairs of A's word (r, p) times B's pair row p, for r < m and j < n (n a
/// multiple of 16). Blocks of kRows rows by two vectors of columns; one pair of k per step: A's
/// word broadcast against 16 words (columns) of B's pair row. (No lambdas here: they would not
/// inherit the target attribute.)
template <class A, bool kAccumulate>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pair_kernel(
    const A& a, std::int64_t m, std::int64_t pairs, const std::uint32_t* b, std::int64_t ldb,
    std::int64_t n, float scale, float* c, std::int64_t ldc) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (std::int64_t r0 = 0; r0 < m; r0 += kRows) {
    const std::int64_t nr = std::min(kRows, m - r0);
    typename A::Row ar[kRows];  // rows past m repeat the last (their sums are not stored)
    for (std::int64_t rr = 0; rr < kRows; ++rr) ar[rr] = a.row(r0 + std::min(rr, nr - 1));
    for (std::int64_t j0 = 0; j0 < n; j0 += 32) {
      const bool two = j0 + 32 <= n;  // else one vector (n is a multiple of 16)
      __m512 s0[kRows], s1[kRows];
      for (std::int64_t rr = 0; rr < kRows; ++rr) {
        if constexpr (kAccumulate) {
          const float* row = c + (r0 + std::min(rr, nr - 1)) * ldc + j0;
          s0[rr] = _mm512_loadu_ps(row);
          s1[rr] = two ? _mm512_loadu_ps(row + 16) : s0[rr];
        } else {
          s0[rr] = s1[rr] = _mm512_setzero_ps();
        }
      }
      const std::uint32_t* brow = b + j0;
      for (std::int64_t p = 0; p < pairs; ++p, brow += ldb) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(brow);
        const __m512bh b1 = two ? (__m512bh)_mm512_loadu_si512(brow + 16) : b0;
        for (std::int64_t rr = 0; rr < kRows; ++rr) {
          const std::uint32_t word = a.word(ar[rr], p);
          const __m512bh w = (__m512bh)_mm512_set1_epi32(static_cast<int>(word));
          s0[rr] = _mm512_dpbf16_ps(s0[rr], w, b0);
          s1[rr] = _mm512_dpbf16_ps(s1[rr], w, b1);
        }
      }
      for (std::int64_t rr = 0; rr < nr; ++rr) {
        float* out = c + (r0 + rr) * ldc + j0;
        _mm512_storeu_ps(out, kAccumulate ? s0[rr] : _mm512_mul_ps(s0[rr], vs));
        if (two) _mm512_storeu_ps(out + 16, kAccumulate ? s1[rr] : _mm512_mul_ps(s1[rr], vs));
      }
    }
  }
}

constexpr __mmask16 kAll = 0xffff;

/// Lanes [0, n) of a 16-lane mask (all of them from 16 up, none at or below 0).
__mmask16 first_lanes(std::int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_row_pairs_avx512(
    const std::uint16_t* src, std::int64_t rows, std::int64_t width, std::int64_t stride,
    std::uint32_t* dst, std::int64_t ldw, std::int64_t n) {
  for (std::int64_t p = 0; 2 * p < rows; ++p) {
    const std::uint16_t* lo = src + 2 * p * stride;
    const std::uint16_t* hi = 2 * p + 1 < rows ? lo + stride : nullptr;
    for (std::int64_t j = 0; j < n; j += 16) {
      const __mmask16 valid = first_lanes(width - j);
      // (The zero-masked forms with every lane selected: see transpose_16x16.)
      const __m512i l = _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(valid, lo + j));
      const __m512i h = hi != nullptr
                            ? _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(valid, hi + j))
                            : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + p * ldw + j, _mm512_or_si512(l, _mm512_maskz_slli_epi32(kAll, h, 16)));
    }
  }
}

__attribute__((target("avx512f"))) void pack_f32_row_pairs_avx512(const float* x, std::int64_t rows,
                                                                  std::int64_t ldx, std::int64_t cols,
                                                                  std::uint32_t* dst,
                                                                  std::int64_t ldw) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (std::int64_t p = 0; 2 * p < rows; ++p) {
    const float* lo = x + 2 * p * ldx;
    const bool has_hi = 2 * p + 1 < rows;
    for (std::int64_t c = 0; c < cols; c += 16) {
      const __m512i l = _mm512_maskz_srli_epi32(kAll, _mm512_castps_si512(_mm512_loadu_ps(lo + c)), 16);
      const __m512i h = has_hi ? _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(lo + ldx + c)), high)
                               : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + p * ldw + c, _mm512_or_si512(l, h));
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_f32_pairs_in_rows_avx512bf16(
    const float* x, std::int64_t rows, std::int64_t ldx, std::int64_t cols, std::uint32_t* dst,
    std::int64_t ldw) {
  // 32 values of a row become 16 words: bf16 values in row order are pair words already. The
  // conversion is exact (the values are bf16 values); lanes past cols load as 0.
  const std::int64_t pairs = (cols + 1) / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ldx;
    for (std::int64_t k = 0; k < cols; k += 32) {
      const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(cols - k), row + k);
      const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(cols - k - 16), row + k + 16);
      const __m512i words = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      _mm512_mask_storeu_epi32(dst + r * ldw + k / 2, first_lanes(pairs - k / 2), words);
    }
  }
}

/// In place: r[i] (16 rows of 16 words) becomes column i (word i of every row, row order).
/// Unpacks pair rows, then 64-bit halves (column 4k + m of rows 4g..4g+3 in 128-bit lane k),
/// then two rounds of 128-bit lane shuffles gather each column's four row groups.
__attribute__((target("avx512f"))) void transpose_16x16(__m512i* r) {
  // (The zero-masked forms with every lane selected: GCC 12's plain unpacks and shuffles pass an
  // undefined vector through, which -Wmaybe-uninitialized reports.)
  const __mmask16 all32 = 0xffff;
  const __mmask8 all64 = 0xff;
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(all32, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(all32, r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {
    u[g + 0] = _mm512_maskz_unpacklo_epi64(all64, t[g], t[g + 2]);
    u[g + 1] = _mm512_maskz_unpackhi_epi64(all64, t[g], t[g + 2]);
    u[g + 2] = _mm512_maskz_unpacklo_epi64(all64, t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_maskz_unpackhi_epi64(all64, t[g + 1], t[g + 3]);
  }
  // u[4g + m], lane k: column 4k + m of rows 4g..4g+3.
  __m512i v[16];
  for (int m = 0; m < 4; ++m) {
    v[m] = _mm512_maskz_shuffle_i32x4(all32, u[m], u[4 + m], 0x88);        // cols m, 8+m of rows 0-7
    v[4 + m] = _mm512_maskz_shuffle_i32x4(all32, u[m], u[4 + m], 0xdd);    // cols 4+m, 12+m of rows 0-7
    v[8 + m] = _mm512_maskz_shuffle_i32x4(all32, u[8 + m], u[12 + m], 0x88);   // the same, rows 8-15
    v[12 + m] = _mm512_maskz_shuffle_i32x4(all32, u[8 + m], u[12 + m], 0xdd);
  }
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm512_maskz_shuffle_i32x4(all32, v[m], v[8 + m], 0x88);
    r[8 + m] = _mm512_maskz_shuffle_i32x4(all32, v[m], v[8 + m], 0xdd);
    r[4 + m] = _mm512_maskz_shuffle_i32x4(all32, v[4 + m], v[12 + m], 0x88);
    r[12 + m] = _mm512_maskz_shuffle_i32x4(all32, v[4 + m], v[12 + m], 0xdd);
  }
}

/// pack_pairs_transposed for an even width, 16 x 16 words at a time (masked loads past the
/// row's words, zero rows past `rows`, masked stores within ldt): the scalar loop's strided
/// single-word stores cost more than the gpt-mini score products they feed.
__attribute__((target("avx512f"))) void pack_even_avx512(const std::uint16_t* src,
                                                         std::int64_t rows, std::int64_t width,
                                                         std::int64_t stride, std::uint32_t* dst,
                                                         std::int64_t ldt) {
  const std::int64_t pairs = width / 2;
  const auto lanes = [](std::int64_t n) {
    return static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u);
  };
  for (std::int64_t r0 = 0; r0 < rows; r0 += 16) {
    const std::int64_t nr = std::min<std::int64_t>(16, rows - r0);
    const __mmask16 store = lanes(ldt - r0);
    for (std::int64_t p0 = 0; p0 < pairs; p0 += 16) {
      const std::int64_t np = std::min<std::int64_t>(16, pairs - p0);
      const __mmask16 load = lanes(np);
      __m512i r[16];
      for (std::int64_t i = 0; i < 16; ++i) {
        r[i] = i < nr ? _mm512_maskz_loadu_epi32(load, src + (r0 + i) * stride + 2 * p0)
                      : _mm512_setzero_si512();
      }
      transpose_16x16(r);
      for (std::int64_t c = 0; c < np; ++c) _mm512_mask_storeu_epi32(dst + (p0 + c) * ldt + r0, store, r[c]);
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
#if MIXPREC_BF16_PAIRS
  const bool vector = width % 2 == 0 && available();  // AVX-512 wherever the pairs run
#else
  const bool vector = false;
#endif
  if (vector) {
#if MIXPREC_BF16_PAIRS
    pack_even_avx512(src, rows, width, stride, dst, ldt);
#endif
  } else {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint16_t* row = src + r * stride;
      for (std::int64_t p = 0; p < pairs; ++p) dst[p * ldt + r] = pair_word(row, p, width);
    }
  }
  for (std::int64_t p = 0; p < pairs; ++p) std::fill(dst + p * ldt + rows, dst + (p + 1) * ldt, 0u);
}

void scores(const std::uint16_t* a, std::int64_t lda, std::int64_t m, std::int64_t kdim,
            const std::uint32_t* b, std::int64_t ldb, std::int64_t n, float scale, float* c,
            std::int64_t ldc) {
#if MIXPREC_BF16_PAIRS
  if (m > 0 && n > 0) {
    pair_kernel<Bf16Rows, false>(Bf16Rows{a, lda, kdim}, m, (kdim + 1) / 2, b, ldb, n, scale, c, ldc);
  }
#else
  (void)a, (void)lda, (void)m, (void)kdim, (void)b, (void)ldb, (void)n, (void)scale, (void)c,
      (void)ldc;
#endif
}

void pack_row_pairs(const std::uint16_t* src, std::int64_t rows, std::int64_t width,
                    std::int64_t stride, std::uint32_t* dst, std::int64_t ldw, std::int64_t n) {
#if MIXPREC_BF16_PAIRS
  if (available()) {
    pack_row_pairs_avx512(src, rows, width, stride, dst, ldw, n);
    return;
  }
#endif
  for (std::int64_t p = 0; 2 * p < rows; ++p) {
    for (std::int64_t j = 0; j < n; ++j) {
      const std::uint32_t lo = j < width ? src[2 * p * stride + j] : 0u;
      const std::uint32_t hi = j < width && 2 * p + 1 < rows ? src[(2 * p + 1) * stride + j] : 0u;
      dst[p * ldw + j] = lo | hi << 16;
    }
  }
}

void pack_f32_row_pairs(const float* x, std::int64_t rows, std::int64_t ldx, std::int64_t cols,
                        std::uint32_t* dst, std::int64_t ldw) {
#if MIXPREC_BF16_PAIRS
  if (rows > 0 && cols > 0) pack_f32_row_pairs_avx512(x, rows, ldx, cols, dst, ldw);
#else
  (void)x, (void)rows, (void)ldx, (void)cols, (void)dst, (void)ldw;
#endif
}

void pack_f32_pairs_in_rows(const float* x, std::int64_t rows, std::int64_t ldx,
                            std::int64_t cols, std::uint32_t* dst, std::int64_t ldw) {
#if MIXPREC_BF16_PAIRS
  if (rows > 0 && cols > 0) pack_f32_pairs_in_rows_avx512bf16(x, rows, ldx, cols, dst, ldw);
#else
  (void)x, (void)rows, (void)ldx, (void)cols, (void)dst, (void)ldw;
#endif
}

void pair_product(const std::uint32_t* a, std::int64_t a_row, std::int64_t a_pair, std::int64_t m,
                  std::int64_t pairs, const std::uint32_t* b, std::int64_t ldb, std::int64_t n,
                  float* c, std::int64_t ldc) {
#if MIXPREC_BF16_PAIRS
  if (m > 0 && n > 0) {
    pair_kernel<PackedWords, true>(PackedWords{a, a_row, a_pair}, m, pairs, b, ldb, n, 1.0f, c, ldc);
  }
#else
  (void)a, (void)a_row, (void)a_pair, (void)m, (void)pairs, (void)b, (void)ldb, (void)n, (void)c,
      (void)ldc;
#endif
}

}  // namespace mixprec::kernels::cpu::attn_bf16
