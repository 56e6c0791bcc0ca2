// Embedding kernels: the cpu backend (Highway, at EVERY SIMD level this CPU supports) against
// kernels::ref, bit for bit (a gather is a copy; the scatter-add adds in the reference's order),
// for every dtype pair, row widths around every vector width, duplicate and padding indices and
// sizes that run on several threads; the scatter-add's values worked out by hand, its single
// rounding of 16-bit gradients, its independence from the thread count; the index errors.
#include <gtest/gtest.h>

#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/embedding.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;

constexpr DType kDT[] = {DType::f32, DType::bf16, DType::f16};
// Row widths around the vector widths (f32 lanes 4/8/16, bytes 16/32/64) and a long one.
constexpr std::int64_t kCols[] = {1, 3, 4, 8, 9, 16, 17, 33, 515};

/// n indices in [0, rows) with many repeats (and every padding_idx case the tests need).
std::vector<std::int64_t> indices_for(std::int64_t n, std::int64_t rows, std::uint32_t seed) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::uint32_t s = seed;
  for (auto& i : v) {
    s = s * 1664525u + 1013904223u;
    i = static_cast<std::int64_t>((s >> 8) % static_cast<std::uint32_t>(rows));
  }
  return v;
}

std::string label(const char* what, DType a, DType b, std::int64_t cols, Isa isa) {
  return std::string(what) + " " + name(a) + "->" + name(b) + " cols=" + std::to_string(cols) +
         " isa=" + name(isa);
}

TEST(EmbeddingKernel, GatherIsABitCopyOnEveryTarget) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : kDT) {
      for (std::int64_t cols : kCols) {
        const std::int64_t rows = 11, n = 29;
        Buffer w = ktest::random_buffer(dt, rows * cols, -3.0f, 3.0f, 3);
        // A NaN with a payload and a -0 in the table must come through untouched.
        std::memset(w.data(), 0xff, size_of(dt));
        w.set(rows * cols - 1, -0.0f);
        const std::vector<std::int64_t> idx = indices_for(n, rows, 5);
        Buffer got(dt, n * cols), want(dt, n * cols);
        cpu::embedding(w.data(), dt, rows, cols, idx.data(), n, got.data());
        ref::embedding(w.data(), dt, rows, cols, idx.data(), n, want.data());
        ktest::expect_bitwise(got, want, label("embedding", dt, dt, cols, isa));
        for (std::int64_t i = 0; i < n; ++i) {  // and the reference is the gather itself
          ASSERT_EQ(std::memcmp(static_cast<const char*>(want.data()) + i * cols * size_of(dt),
                                static_cast<const char*>(w.data()) + idx[i] * cols * size_of(dt),
                                static_cast<std::size_t>(cols) * size_of(dt)),
                    0);
        }
      }
    }
  }
}

TEST(EmbeddingKernel, ScatterAddMatchesTheReferenceBitForBit) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType g_dt : kDT) {
      for (DType w_dt : kDT) {
        for (std::int64_t cols : kCols) {
          const std::int64_t rows = 13, n = 57;
          const Buffer dy = ktest::random_buffer(g_dt, n * cols, -2.0f, 2.0f, 7);
          const std::vector<std::int64_t> idx = indices_for(n, rows, 9);
          for (std::int64_t pad : {std::int64_t{-1}, idx[0]}) {
            Buffer got(w_dt, rows * cols), want(w_dt, rows * cols);
            cpu::embedding_backward(dy.data(), g_dt, idx.data(), n, rows, cols, pad, got.data(), w_dt);
            ref::embedding_backward(dy.data(), g_dt, idx.data(), n, rows, cols, pad, want.data(), w_dt);
            ktest::expect_bitwise(got, want, label("embedding_backward", g_dt, w_dt, cols, isa) +
                                                 " padding_idx=" + std::to_string(pad));
          }
        }
      }
    }
  }
}

TEST(EmbeddingKernel, ScatterAddSumsDuplicatesSkipsPaddingAndZeroesUnusedRows) {
  // rows 0..3, D = 2: index 1 three times, 3 once, 2 (the padding row) once, 0 never.
  const std::vector<std::int64_t> idx = {1, 3, 1, 2, 1};
  const std::vector<float> dy = {1, 10, 2, 20, 3, 30, 4, 40, 5, 50};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (bool use_ref : {false, true}) {
      std::vector<float> dw(8, -7.0f);  // garbage first: every row must be written
      (use_ref ? ref::embedding_backward : cpu::embedding_backward)(
          dy.data(), DType::f32, idx.data(), 5, 4, 2, 2, dw.data(), DType::f32);
      EXPECT_EQ(dw, (std::vector<float>{0, 0, 1 + 3 + 5, 10 + 30 + 50, 0, 0, 2, 20}))
          << (use_ref ? "ref" : "cpu") << " isa=" << name(isa);
    }
  }
}

TEST(EmbeddingKernel, SixteenBitGradientsAreRoundedOnceFromAnF32Sum) {
  // 1 + 4 * 2^-9 = 1 + 2^-7 is a bf16 value; adding 2^-9 to 1 in bf16 one at a time would
  // round back to 1 each time (half an ulp of 1 is 2^-8).
  const std::vector<std::int64_t> idx = {0, 0, 0, 0, 0};
  Buffer dy(DType::bf16, 5);
  dy.set(0, 1.0f);
  for (int i = 1; i < 5; ++i) dy.set(i, 0.001953125f);
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    Buffer dw(DType::bf16, 1);
    cpu::embedding_backward(dy.data(), DType::bf16, idx.data(), 5, 1, 1, -1, dw.data(), DType::bf16);
    EXPECT_EQ(dw.get(0), 1.0078125f) << name(isa);
  }
}

TEST(EmbeddingKernel, LargeInputsDoNotDependOnTheThreadCount) {
  // Enough rows and indices for many parallel tasks; few table rows, so every row has
  // hundreds of contributions and the order of additions matters to the last bit.
  const std::int64_t rows = 37, cols = 300, n = 6000;
  const Buffer dy = ktest::random_buffer(DType::f32, n * cols, -1.0f, 1.0f, 11);
  const Buffer w = ktest::random_buffer(DType::bf16, rows * cols, -1.0f, 1.0f, 12);
  const std::vector<std::int64_t> idx = indices_for(n, rows, 13);
  Buffer want_g(DType::bf16, rows * cols), want_y(DType::bf16, n * cols);
  ref::embedding_backward(dy.data(), DType::f32, idx.data(), n, rows, cols, 5, want_g.data(), DType::bf16);
  ref::embedding(w.data(), DType::bf16, rows, cols, idx.data(), n, want_y.data());
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Buffer g(DType::bf16, rows * cols), y(DType::bf16, n * cols);
    cpu::embedding_backward(dy.data(), DType::f32, idx.data(), n, rows, cols, 5, g.data(), DType::bf16);
    cpu::embedding(w.data(), DType::bf16, rows, cols, idx.data(), n, y.data());
    ktest::expect_bitwise(g, want_g, "backward threads=" + std::to_string(threads));
    ktest::expect_bitwise(y, want_y, "forward threads=" + std::to_string(threads));
  }
  omp_set_num_threads(saved);
}

TEST(EmbeddingKernel, BadIndicesThrowValueErrorNamingTheIndexAndV) {
  const std::vector<float> w(12, 1.0f);
  std::vector<float> out(12), dw(12);
  for (const std::vector<std::int64_t>& idx : {std::vector<std::int64_t>{0, 4}, {-1, 0}}) {
    for (bool use_ref : {false, true}) {
      try {
        (use_ref ? ref::embedding : cpu::embedding)(w.data(), DType::f32, 4, 3, idx.data(), 2,
                                                    out.data());
        FAIL() << "expected ValueError";
      } catch (const ValueError& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind("embedding:", 0), 0u) << msg;
        EXPECT_NE(msg.find("index " + std::to_string(idx[0] == 0 ? idx[1] : idx[0])),
                  std::string::npos) << msg;
        EXPECT_NE(msg.find("table of 4 rows"), std::string::npos) << msg;
      }
      EXPECT_THROW((use_ref ? ref::embedding_backward : cpu::embedding_backward)(
                       out.data(), DType::f32, idx.data(), 2, 4, 3, -1, dw.data(), DType::f32),
                   ValueError);
    }
  }
  const std::vector<std::int64_t> ok = {0, 1};
  EXPECT_THROW(cpu::embedding_backward(out.data(), DType::f32, ok.data(), 2, 4, 3, 4, dw.data(),
                                       DType::f32),
               ValueError);  // padding_idx must be a row of the table
}

}  // namespace
}  // namespace mixprec::kernels
