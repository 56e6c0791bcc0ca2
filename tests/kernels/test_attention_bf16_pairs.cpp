// The bf16 pair products of attention (kernels/cpu/attention_bf16_pairs.h): the packings, bit
// for bit, and the vdpbf16ps score and p/ds product kernels against a double-precision scalar
// reference on CPUs with AVX512_BF16 (elsewhere available() must say no, and the test says why
// it has nothing more to run). The attention kernel's own tests (test_attention.cpp) run the
// whole kernel under every ISA cap this CPU allows, the pair path included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/attention_bf16_pairs.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/half.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cpu::attn_bf16 {
namespace {

/// rows x width bf16 values in [-2, 2) (bit patterns), rows `stride` elements apart.
std::vector<std::uint16_t> random_rows(std::int64_t rows, std::int64_t width, std::int64_t stride,
                                       unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<std::uint16_t> v(static_cast<std::size_t>(rows * stride), 0xffffu);  // NaN gaps
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < width; ++k) v[r * stride + k] = f32_to_bf16_bits(dist(gen));
  }
  return v;
}

TEST(AttentionBf16Pairs, PackingTransposesPairWordsAndZeroesThePadding) {
  // Even widths take 16 x 16 word blocks on CPUs with the pair products (partial blocks of
  // words and rows, ldt not a multiple of 16), odd ones and other CPUs the scalar loop.
  struct Case {
    std::int64_t width, rows, ldt;
  };
  for (const Case c : {Case{1, 5, 16}, Case{6, 5, 16}, Case{7, 5, 16}, Case{64, 5, 16},
                       Case{32, 64, 64}, Case{30, 37, 40}, Case{70, 17, 48}, Case{2, 16, 16},
                       Case{33, 21, 32}}) {
    const std::int64_t width = c.width, rows = c.rows, ldt = c.ldt;
    const std::int64_t stride = width + 3, pairs = (width + 1) / 2;
    const std::vector<std::uint16_t> src = random_rows(rows, width, stride, 7);
    std::vector<std::uint32_t> dst(static_cast<std::size_t>(pairs * ldt), 0xdeadbeefu);
    pack_pairs_transposed(src.data(), rows, width, stride, dst.data(), ldt);
    for (std::int64_t p = 0; p < pairs; ++p) {
      for (std::int64_t r = 0; r < ldt; ++r) {
        std::uint32_t want = 0;
        if (r < rows) {
          const std::uint32_t lo = src[r * stride + 2 * p];
          const std::uint32_t hi = 2 * p + 1 < width ? src[r * stride + 2 * p + 1] : 0u;
          want = lo | hi << 16;  // element 2p in the low half, as vdpbf16ps pairs them
        }
        EXPECT_EQ(dst[p * ldt + r], want) << "width " << width << " word " << p << " row " << r;
      }
    }
  }
}

TEST(AttentionBf16Pairs, AvailableOnlyWhereTheRealCpuHasAvx512Bf16) {
#if defined(__x86_64__)
  const CpuFeatures& hw = hardware_cpu_features();
  const bool hardware = hw.avx512_bf16 && hw.avx512bw && hw.avx512vl;
  EXPECT_EQ(available(), hardware && isa_allowed(Isa::avx512_bf16));
#else
  EXPECT_FALSE(available());  // no x86 intrinsics compiled in
#endif
  if (available()) {  // a cap below the level turns the path off
    const Isa saved = max_isa();
    set_max_isa(Isa::avx512);
    EXPECT_FALSE(available());
    set_max_isa(saved);
  }
}

TEST(AttentionBf16Pairs, ScoresMatchADoublePrecisionReference) {
  if (!available()) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (or MIXPREC_ISA caps it): the pair kernel "
                    "cannot run here; the packing test above still runs";
  }
  struct Case {
    std::int64_t m, n_valid, kdim;
  };
  // Partial row blocks, one and two vectors of columns, odd and even k.
  for (const Case c : {Case{64, 64, 64}, Case{5, 9, 7}, Case{13, 40, 32}, Case{1, 16, 1}}) {
    const std::int64_t n = (c.n_valid + 15) / 16 * 16, lda = c.kdim + 2, ldb = n + 16;
    const std::int64_t ldc = n + 5;
    const float scale = 0.125f;
    const std::vector<std::uint16_t> a = random_rows(c.m, c.kdim, lda, 1);
    const std::vector<std::uint16_t> brows = random_rows(c.n_valid, c.kdim, c.kdim, 2);
    std::vector<std::uint32_t> b(static_cast<std::size_t>((c.kdim + 1) / 2 * ldb));
    pack_pairs_transposed(brows.data(), c.n_valid, c.kdim, c.kdim, b.data(), ldb);
    std::vector<float> out(static_cast<std::size_t>(c.m * ldc), -7.0f);
    scores(a.data(), lda, c.m, c.kdim, b.data(), ldb, n, scale, out.data(), ldc);
    for (std::int64_t r = 0; r < c.m; ++r) {
      for (std::int64_t j = 0; j < n; ++j) {
        double want = 0.0, magnitude = 0.0;
        for (std::int64_t k = 0; j < c.n_valid && k < c.kdim; ++k) {
          const double t = static_cast<double>(bf16_bits_to_f32(a[r * lda + k])) *
                           static_cast<double>(bf16_bits_to_f32(brows[j * c.kdim + k]));
          want += t;
          magnitude += std::fabs(t);
        }
        // Exact products, an f32 sum of kdim terms: kdim roundings of at most half an ulp
        // of the running magnitude.
        const double tol = static_cast<double>(c.kdim) * 0x1p-24 * magnitude * scale + 1e-30;
        EXPECT_NEAR(out[r * ldc + j], want * scale, tol)
            << "m " << c.m << " n " << c.n_valid << " k " << c.kdim << " at (" << r << ", " << j
            << ")";
      }
      for (std::int64_t j = n; j < ldc; ++j) EXPECT_EQ(out[r * ldc + j], -7.0f) << "wrote past n";
    }
  }
}

TEST(AttentionBf16Pairs, RowPairsInterleaveTwoRowsAndZeroTheRest) {
  // Odd and even row counts, widths below, at and past a vector, n padded past the width.
  struct Case {
    std::int64_t rows, width, n;
  };
  for (const Case c : {Case{1, 3, 16}, Case{2, 16, 16}, Case{5, 20, 32}, Case{64, 64, 64},
                       Case{7, 33, 48}}) {
    const std::int64_t stride = c.width + 5, pairs = (c.rows + 1) / 2, ldw = c.n + 16;
    const std::vector<std::uint16_t> src = random_rows(c.rows, c.width, stride, 9);
    std::vector<std::uint32_t> dst(static_cast<std::size_t>(pairs * ldw), 0xdeadbeefu);
    pack_row_pairs(src.data(), c.rows, c.width, stride, dst.data(), ldw, c.n);
    for (std::int64_t p = 0; p < pairs; ++p) {
      for (std::int64_t j = 0; j < ldw; ++j) {
        std::uint32_t want = 0xdeadbeefu;  // past n: untouched
        if (j < c.n) {
          const std::uint32_t lo = j < c.width ? src[2 * p * stride + j] : 0u;
          const std::uint32_t hi = j < c.width && 2 * p + 1 < c.rows ? src[(2 * p + 1) * stride + j] : 0u;
          want = lo | hi << 16;
        }
        EXPECT_EQ(dst[p * ldw + j], want) << "rows " << c.rows << " width " << c.width << " word (" << p << ", " << j << ")";
      }
    }
  }
}

/// rows x ld f32 values that are bf16 values (a rounded p or ds tile), NaN past `valid` columns
/// of every row (what a tile's padding may hold).
std::vector<float> rounded_tile(std::int64_t rows, std::int64_t ld, std::int64_t valid, unsigned seed) {
  const std::vector<std::uint16_t> bits = random_rows(rows, valid, ld, seed);
  std::vector<float> t(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) t[i] = bf16_bits_to_f32(bits[i]);
  return t;
}

TEST(AttentionBf16Pairs, RoundedTilesPackToTheirBf16Bits) {
  if (!available()) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (or MIXPREC_ISA caps it): the f32 tile packings "
                    "exist only for the pair kernel; the bf16 packings above still run";
  }
  const auto bits = [](float x) { return static_cast<std::uint32_t>(f32_to_bf16_bits(x)); };
  for (const std::int64_t rows : {1, 2, 7, 64}) {
    for (const std::int64_t cols : {1, 16, 31, 33, 64}) {
      const std::int64_t ld = 64, padded = (cols + 15) / 16 * 16;
      const std::vector<float> x = rounded_tile(rows, ld, ld, 4);
      // Pairs across rows, columns up to the padded count.
      std::vector<std::uint32_t> across(static_cast<std::size_t>((rows + 1) / 2 * padded));
      pack_f32_row_pairs(x.data(), rows, ld, padded, across.data(), padded);
      for (std::int64_t p = 0; 2 * p < rows; ++p) {
        for (std::int64_t c = 0; c < padded; ++c) {
          const std::uint32_t hi = 2 * p + 1 < rows ? bits(x[(2 * p + 1) * ld + c]) : 0u;
          EXPECT_EQ(across[p * padded + c], bits(x[2 * p * ld + c]) | hi << 16)
              << rows << " x " << cols << " word (" << p << ", " << c << ")";
        }
      }
      // Pairs along each row: columns past cols (NaN here) never enter a word.
      const std::vector<float> y = rounded_tile(rows, ld, cols, 5);
      const std::int64_t pairs = (cols + 1) / 2, ldw = pairs + 3;
      std::vector<std::uint32_t> along(static_cast<std::size_t>(rows * ldw), 0xdeadbeefu);
      pack_f32_pairs_in_rows(y.data(), rows, ld, cols, along.data(), ldw);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t p = 0; p < ldw; ++p) {
          std::uint32_t want = 0xdeadbeefu;
          if (p < pairs) {
            want = bits(y[r * ld + 2 * p]) | (2 * p + 1 < cols ? bits(y[r * ld + 2 * p + 1]) : 0u) << 16;
          }
          EXPECT_EQ(along[r * ldw + p], want) << rows << " x " << cols << " word (" << r << ", " << p << ")";
        }
      }
    }
  }
}

TEST(AttentionBf16Pairs, PairProductsAddToTheirOutputLikeADoublePrecisionReference) {
  if (!available()) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (or MIXPREC_ISA caps it): the pair kernel "
                    "cannot run here; the packing tests above still run";
  }
  struct Case {
    std::int64_t m, n, kdim;
  };
  // Partial row blocks, one and two vectors of columns, odd and even k, both A layouts.
  for (const Case c : {Case{64, 64, 64}, Case{5, 16, 7}, Case{13, 48, 32}, Case{1, 16, 1}, Case{9, 32, 63}}) {
    for (const bool in_rows : {false, true}) {
      const std::int64_t ld = 64, ldc = c.n + 3, m_padded = (c.m + 15) / 16 * 16;
      // A as a tile: element (r, k) at x[k * ld + r] (across rows) or x[r * ld + k] (in rows).
      const std::vector<float> x = rounded_tile(64, ld, ld, 6);
      const auto a_at = [&](std::int64_t r, std::int64_t k) { return in_rows ? x[r * ld + k] : x[k * ld + r]; };
      const std::vector<std::uint16_t> brows = random_rows(c.kdim, c.n - 2, c.n, 7);
      const std::int64_t pairs = (c.kdim + 1) / 2;
      std::vector<std::uint32_t> b(static_cast<std::size_t>(pairs * c.n));
      pack_row_pairs(brows.data(), c.kdim, c.n - 2, c.n, b.data(), c.n, c.n);
      std::vector<std::uint32_t> a(static_cast<std::size_t>(pairs * m_padded + c.m * pairs));
      if (in_rows) {
        pack_f32_pairs_in_rows(x.data(), c.m, ld, c.kdim, a.data(), pairs);
      } else {
        pack_f32_row_pairs(x.data(), c.kdim, ld, m_padded, a.data(), m_padded);
      }
      std::vector<float> out(static_cast<std::size_t>(c.m * ldc));
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = 0.25f * static_cast<float>(i % 7);
      const std::vector<float> before = out;
      if (in_rows) {
        pair_product(a.data(), pairs, 1, c.m, pairs, b.data(), c.n, c.n, out.data(), ldc);
      } else {
        pair_product(a.data(), 1, m_padded, c.m, pairs, b.data(), c.n, c.n, out.data(), ldc);
      }
      for (std::int64_t r = 0; r < c.m; ++r) {
        for (std::int64_t j = 0; j < ldc; ++j) {
          const float got = out[r * ldc + j];
          if (j >= c.n) {
            EXPECT_EQ(got, before[r * ldc + j]) << "wrote past n";
            continue;
          }
          double want = before[r * ldc + j], magnitude = std::fabs(want);
          for (std::int64_t k = 0; j < c.n - 2 && k < c.kdim; ++k) {
            const double t = static_cast<double>(a_at(r, k)) * static_cast<double>(bf16_bits_to_f32(brows[k * c.n + j]));
            want += t;
            magnitude += std::fabs(t);
          }
          const double tol = static_cast<double>(c.kdim + 1) * 0x1p-24 * magnitude + 1e-30;
          EXPECT_NEAR(got, want, tol) << (in_rows ? "in rows" : "across rows") << " m " << c.m
                                      << " n " << c.n << " k " << c.kdim << " at (" << r << ", " << j << ")";
        }
      }
    }
  }
}

TEST(AttentionBf16Pairs, TheVerboseLogSaysWhetherTheScoreProductsRanOnThem) {
  AttentionDesc d;
  d.bh = 1;
  d.tq = d.tk = 3;
  d.d = d.dv = 4;
  d.dtype = DType::bf16;
  const std::vector<std::uint16_t> x = random_rows(3, 4, 4, 3);
  std::vector<std::uint16_t> out(12);
  std::vector<float> lse(3);
  const auto log_of = [&](DType t) {
    d.dtype = t;
    set_verbose(true);
    testing::internal::CaptureStderr();
    cpu::attention_forward(d, x.data(), x.data(), x.data(), out.data(), lse.data());
    const std::string log = testing::internal::GetCapturedStderr();
    set_verbose(false);
    return log;
  };
  const std::string bf16_log = log_of(DType::bf16);
  EXPECT_NE(bf16_log.find("attention_forward bf16"), std::string::npos) << bf16_log;
  if (available()) {
    EXPECT_NE(bf16_log.find("on vdpbf16ps"), std::string::npos) << bf16_log;
    // Without round_probs p stays f32 (attention precision highest): only q k^T on the pairs.
    EXPECT_NE(bf16_log.find("p and ds in f32"), std::string::npos) << bf16_log;
    d.round_probs = true;
    const std::string rounded_log = log_of(DType::bf16);
    d.round_probs = false;
    EXPECT_NE(rounded_log.find("q k^T and p v on vdpbf16ps"), std::string::npos) << rounded_log;
  } else {
    EXPECT_NE(bf16_log.find("vdpbf16ps score products: "), std::string::npos) << bf16_log;
    EXPECT_EQ(bf16_log.find("on vdpbf16ps"), std::string::npos) << bf16_log;
  }
  // f32 inputs (the same bits read as half as many f32 values) never take the pair products.
  d.d = d.dv = 2;
  const std::string f32_log = log_of(DType::f32);
  EXPECT_NE(f32_log.find("attention_forward f32"), std::string::npos) << f32_log;
  EXPECT_EQ(f32_log.find("vdpbf16ps"), std::string::npos) << f32_log;
}

}  // namespace
}  // namespace mixprec::kernels::cpu::attn_bf16
