// The bf16 pair products of attention (kernels/cpu/attention_bf16_pairs.h): the packing, bit
// for bit on every machine, and the vdpbf16ps score kernel against a double-precision scalar
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
