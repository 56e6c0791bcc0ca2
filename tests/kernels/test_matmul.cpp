#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu_class_expect.h"
#include "kernels/matmul.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

// A buffer of n elements of one dtype, built from (and read back as) floats.
struct Buf {
  DType dtype = DType::f32;
  std::vector<std::byte> bytes;

  Buf(DType t, const std::vector<float>& values) : dtype(t), bytes(values.size() * size_of(t)) {
    for (std::size_t i = 0; i < values.size(); ++i) set(i, values[i]);
  }
  void set(std::size_t i, float v) {
    if (dtype == DType::f32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const std::uint16_t bits = dtype == DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
  }
  float get(std::size_t i) const {
    if (dtype == DType::f32) {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      return v;
    }
    std::uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    return dtype == DType::bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
  }
  std::size_t size() const { return bytes.size() / size_of(dtype); }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
};

std::vector<float> uniform(std::size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::string describe(const MatmulDesc& d) {
  return std::string(name(d.dtype)) + "->" + name(d.c_dtype) + " m=" + std::to_string(d.m) +
         " n=" + std::to_string(d.n) + " k=" + std::to_string(d.k) +
         " ta=" + std::to_string(d.trans_a) + " tb=" + std::to_string(d.trans_b) +
         " bias=" + (d.has_bias ? name(d.bias_dtype) : "none") +
         " relu=" + std::to_string(d.post_op == MatmulPostOp::relu) +
         " acc=" + std::to_string(d.accumulate);
}

// Runs kernels::matmul and the reference on the same random operands and compares them.
// Both sum the same exact products in f32, only in a different order, so before the final
// rounding they differ by at most the f32 accumulation error, which for K terms of random sign
// grows like sqrt(K) * eps(f32) * sum|a*b| (Higham's probabilistic bound; 4x margin). Rounding
// to c_dtype can then split two nearby values across one ulp of c_dtype: <= 2 * eps(c) * |ref|
// (the 2 covers a value rounding up into the next binade). min_subnormal(c) covers results that
// underflow. A wrong transpose, dtype or flag gives errors of order 1, far above this.
void compare_with_reference(const MatmulDesc& d, std::uint32_t seed) {
  SCOPED_TRACE(describe(d));
  std::mt19937 rng(seed);
  const auto m = static_cast<std::size_t>(d.m), n = static_cast<std::size_t>(d.n),
             k = static_cast<std::size_t>(d.k);
  const Buf a(d.dtype, uniform(m * k, rng));
  const Buf b(d.dtype, uniform(k * n, rng));
  const Buf bias(d.bias_dtype, uniform(n, rng));
  const Buf c0(d.c_dtype, uniform(m * n, rng));
  Buf got = c0, want = c0;
  matmul(d, a.data(), b.data(), d.has_bias ? bias.data() : nullptr, got.data());
  ref::matmul(d, a.data(), b.data(), d.has_bias ? bias.data() : nullptr, want.data());

  const double eps32 = traits(DType::f32).epsilon;
  const double eps_c = traits(d.c_dtype).epsilon;
  const double atol = traits(d.c_dtype).min_subnormal;
  int failures = 0;
  // |op(A)| as [m, k] and |op(B)| as [n, k], for the magnitude sum|a*b| in the tolerance.
  std::vector<double> abs_a(m * k), abs_bt(n * k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p)
      abs_a[i * k + p] = std::fabs(a.get(d.trans_a ? p * m + i : i * k + p));
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t p = 0; p < k; ++p)
      abs_bt[j * k + p] = std::fabs(b.get(d.trans_b ? j * k + p : p * n + j));
  for (std::size_t i = 0; i < m && failures < 5; ++i) {
    for (std::size_t j = 0; j < n && failures < 5; ++j) {
      double mag = d.has_bias ? std::fabs(bias.get(j)) : 0.0;
      if (d.accumulate) mag += std::fabs(c0.get(i * n + j));
      for (std::size_t p = 0; p < k; ++p) mag += abs_a[i * k + p] * abs_bt[j * k + p];
      const double w = want.get(i * n + j), g = got.get(i * n + j);
      const double tol = atol + 2.0 * eps_c * std::fabs(w) +
                         4.0 * std::sqrt(static_cast<double>(k) + 2.0) * eps32 * mag;
      if (!(std::fabs(g - w) <= tol)) {
        ++failures;
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << g << ", reference " << w
                      << ", tolerance " << tol;
      }
    }
  }
}

constexpr DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};

// Sets the bf16 route for one scope. Both routes must agree with the reference: native runs
// oneDNN's bf16 kernel, widen converts to f32 (the default on CPUs without avx512_bf16).
class Bf16Route {
 public:
  explicit Bf16Route(MatmulBf16Route route) : previous_(set_matmul_bf16_route(route)) {}
  ~Bf16Route() { set_matmul_bf16_route(previous_); }
  Bf16Route(const Bf16Route&) = delete;
  Bf16Route& operator=(const Bf16Route&) = delete;

 private:
  MatmulBf16Route previous_;
};

// The input dtypes with each bf16 route (the route only matters for bf16).
struct Variant {
  DType dtype;
  MatmulBf16Route route;
};
constexpr Variant kVariants[] = {{DType::f32, MatmulBf16Route::automatic},
                                 {DType::bf16, MatmulBf16Route::native},
                                 {DType::bf16, MatmulBf16Route::widen},
                                 {DType::f16, MatmulBf16Route::automatic}};

// MIXPREC_MATMUL=ref bypasses oneDNN, so tests of the oneDNN cache and log do not apply.
bool reference_forced() {
  const char* v = std::getenv("MIXPREC_MATMUL");
  return v != nullptr && std::string(v) == "ref";
}

TEST(MatmulVsReference, AllTransposesDtypesShapesAndFlags) {
  struct Shape { std::int64_t m, n, k; };
  const Shape shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 128, 256}};
  std::uint32_t count = 0;
  for (const auto& [t, route] : kVariants)
    for (int trans = 0; trans < 4; ++trans)
      for (const Shape& s : shapes)
        for (int flags = 0; flags < 8; ++flags) {
          const Bf16Route scoped(route);
          MatmulDesc d;
          d.m = s.m, d.n = s.n, d.k = s.k;
          d.trans_a = trans & 1, d.trans_b = (trans >> 1) & 1;
          d.dtype = t;
          d.has_bias = flags & 1;
          d.post_op = (flags & 2) ? MatmulPostOp::relu : MatmulPostOp::none;
          d.accumulate = flags & 4;
          // Rotate through the allowed C and bias dtypes; the next test covers them all fully.
          d.c_dtype = (count % 3 == 1) ? DType::f32 : t;
          d.bias_dtype = (count % 5 == 2) ? DType::f32 : t;
          compare_with_reference(d, 1000 + count++);
        }
}

// A row-major B whose rows are 4 KiB apart (n = 1024 f32) with m >= 64 is copied into padded rows
// before oneDNN sees it (a 2x speed-up on Zen 2); the result must not change, in any dtype or
// with any epilogue, and the log says so.
TEST(MatmulVsReference, PaddedBRowsGiveTheSameResult) {
  std::uint32_t count = 0;
  for (const auto& [t, route] : kVariants)
    for (int flags = 0; flags < 8; ++flags) {
      const Bf16Route scoped(route);
      MatmulDesc d;
      d.m = 64, d.n = 1024, d.k = 256;
      d.trans_a = flags & 1;
      d.dtype = t, d.c_dtype = t, d.bias_dtype = t;
      d.has_bias = flags & 2;
      d.post_op = MatmulPostOp::relu;
      d.accumulate = flags & 4;
      compare_with_reference(d, 5000 + count++);
    }
  if (reference_forced()) return;
  const bool was = verbose_enabled();
  set_verbose(true);
  MatmulDesc d;
  d.m = 64, d.n = 1024, d.k = 256;
  const Buf a(DType::f32, std::vector<float>(64 * 256, 1.0f)), b(DType::f32, std::vector<float>(256 * 1024, 0.5f));
  Buf c(DType::f32, std::vector<float>(64 * 1024, 0.0f));
  testing::internal::CaptureStderr();
  matmul(d, a.data(), b.data(), nullptr, c.data());
  d.trans_b = true;  // a transposed B is read along its rows: never padded
  matmul(d, a.data(), b.data(), nullptr, c.data());
  const std::string log = testing::internal::GetCapturedStderr();
  set_verbose(was);
  const std::size_t first = log.find("(B rows padded)");
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("(B rows padded)", first + 1), std::string::npos) << log;
  EXPECT_EQ(c.get(0), 128.0f);
}

TEST(MatmulVsReference, EveryAllowedDtypeCombination) {
  std::uint32_t count = 0;
  for (const auto& [t, route] : kVariants)
    for (DType c : {t, DType::f32})
      for (DType bias : {t, DType::f32})
        for (int flags = 0; flags < 4; ++flags) {
          const Bf16Route scoped(route);
          MatmulDesc d;
          d.m = 17, d.n = 33, d.k = 65;
          d.trans_b = true;
          d.dtype = t, d.c_dtype = c, d.has_bias = true, d.bias_dtype = bias;
          d.post_op = (flags & 1) ? MatmulPostOp::relu : MatmulPostOp::none;
          d.accumulate = flags & 2;
          compare_with_reference(d, 5000 + count++);
        }
}

// Small integers make every product and partial sum exact in f32, so summation order cannot
// matter and kernels::matmul must match the reference bit for bit, even after rounding to a
// 16-bit C (rounding the same exact f32 value once gives the same bits).
TEST(MatmulExact, SmallIntegersMatchReferenceBitForBit) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dist(-8, 8);
  auto ints = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(dist(rng));
    return v;
  };
  for (const auto& [t, route] : kVariants)
    for (int trans = 0; trans < 4; ++trans)
      for (int acc = 0; acc < 2; ++acc) {
        const Bf16Route scoped(route);
        MatmulDesc d;
        d.m = 9, d.n = 31, d.k = 40;
        d.trans_a = trans & 1, d.trans_b = trans >> 1;
        d.dtype = t, d.c_dtype = t, d.has_bias = true, d.bias_dtype = t;
        d.post_op = MatmulPostOp::relu, d.accumulate = acc;
        SCOPED_TRACE(describe(d));
        const Buf a(t, ints(9 * 40)), b(t, ints(40 * 31)), bias(t, ints(31));
        Buf got(t, ints(9 * 31));
        Buf want = got;
        matmul(d, a.data(), b.data(), bias.data(), got.data());
        ref::matmul(d, a.data(), b.data(), bias.data(), want.data());
        EXPECT_EQ(got.bytes, want.bytes);
      }
}

// Runs a 1 x 1 GEMM with K terms through both kernels and returns kernels::matmul's result
// after checking that the reference agrees bit for bit.
float dot(DType t, DType c_dtype, const std::vector<float>& a, const std::vector<float>& b) {
  MatmulDesc d;
  d.m = 1, d.n = 1, d.k = static_cast<std::int64_t>(a.size());
  d.dtype = t, d.c_dtype = c_dtype;
  const Buf ab(t, a), bb(t, b);
  for (std::size_t i = 0; i < a.size(); ++i) {  // the inputs must be exact in t
    EXPECT_EQ(ab.get(i), a[i]);
    EXPECT_EQ(bb.get(i), b[i]);
  }
  Buf got(c_dtype, {0.0f}), want(c_dtype, {0.0f});
  matmul(d, ab.data(), bb.data(), nullptr, got.data());
  ref::matmul(d, ab.data(), bb.data(), nullptr, want.data());
  EXPECT_EQ(got.bytes, want.bytes);
  return got.get(0);
}

TEST(MatmulF16, OverflowsToInfOnlyWhenTheFinalResultIsOutOfRange) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(dot(DType::f16, DType::f16, {256, 256}, {256, 1}), inf);  // 65792
  EXPECT_EQ(dot(DType::f16, DType::f16, {-256, -256}, {256, 1}), -inf);
  EXPECT_EQ(dot(DType::f16, DType::f16, {255.875f}, {256}), 65504.0f);  // f16 max
  EXPECT_EQ(dot(DType::f16, DType::f16, {255, 0.875f}, {256, 256}), 65504.0f);
  EXPECT_EQ(dot(DType::f16, DType::f16, {255.875f, 15}, {256, 1}), 65504.0f);  // 65519 rounds down
  EXPECT_EQ(dot(DType::f16, DType::f16, {255.875f, 16}, {256, 1}), inf);  // 65520 ties to Inf
  // 300 * 300 = 90000 overflows f16, but the f32 accumulator (like a Tensor Core's) holds it
  // and the final sum is in range.
  EXPECT_EQ(dot(DType::f16, DType::f16, {300, 300, 1}, {300, -300, 1}), 1.0f);
  EXPECT_EQ(dot(DType::f16, DType::f16, {300, 300, 300}, {300, 300, -600}), 0.0f);
  // An f32 C keeps the overflowing value.
  EXPECT_EQ(dot(DType::f16, DType::f32, {256, 256}, {256, 1}), 65792.0f);
}

// Products of two bf16 (or two f16) are exact in f32, so a difference visible only below
// the inputs' precision survives: rounding the products first would give 0.
TEST(MatmulProducts, SixteenBitProductsAreExactInF32) {
  const float b7 = 1.0f + std::ldexp(1.0f, -7), b6 = 1.0f + std::ldexp(1.0f, -6);
  for (MatmulBf16Route route : {MatmulBf16Route::native, MatmulBf16Route::widen}) {
    const Bf16Route scoped(route);
    EXPECT_EQ(dot(DType::bf16, DType::f32, {b7, 1}, {b7, -b6}), std::ldexp(1.0f, -14));
  }
  const float h10 = 1.0f + std::ldexp(1.0f, -10), h9 = 1.0f + std::ldexp(1.0f, -9);
  EXPECT_EQ(dot(DType::f16, DType::f32, {h10, 1}, {h10, -h9}), std::ldexp(1.0f, -20));
  EXPECT_EQ(dot(DType::f16, DType::f16, {h10, 1}, {h10, -h9}), std::ldexp(1.0f, -20));
}

TEST(MatmulDegenerate, KZeroGivesPostOpOfBiasPlusOldC) {
  for (DType t : kDTypes)
    for (int flags = 0; flags < 8; ++flags) {
      MatmulDesc d;
      d.m = 2, d.n = 3, d.k = 0;
      d.dtype = t, d.c_dtype = t, d.bias_dtype = t;
      d.has_bias = flags & 1;
      d.post_op = (flags & 2) ? MatmulPostOp::relu : MatmulPostOp::none;
      d.accumulate = flags & 4;
      SCOPED_TRACE(describe(d));
      const Buf bias(t, {-1.5f, 2.0f, 0.25f});
      const std::vector<float> old{10, 20, 30, 40, 50, 60};
      Buf c(t, old);
      matmul(d, nullptr, nullptr, d.has_bias ? bias.data() : nullptr, c.data());
      for (std::size_t i = 0; i < 6; ++i) {
        float v = d.has_bias ? bias.get(i % 3) : 0.0f;
        if (d.post_op == MatmulPostOp::relu && v < 0) v = 0;
        if (d.accumulate) v += old[i];
        EXPECT_EQ(c.get(i), v) << "element " << i;
      }
    }
}

TEST(MatmulDegenerate, EmptyResultTouchesNothing) {
  MatmulDesc d;
  d.m = 0, d.n = 5, d.k = 3;
  EXPECT_NO_THROW(matmul(d, nullptr, nullptr, nullptr, nullptr));
  d.m = 4, d.n = 0;
  const std::vector<float> a(12, 1.0f);
  EXPECT_NO_THROW(matmul(d, a.data(), nullptr, nullptr, nullptr));
}

template <class E>
void expect_matmul_error(const MatmulDesc& d, const void* a, const void* b, const void* bias,
                         void* c) {
  for (int use_ref = 0; use_ref < 2; ++use_ref) {
    try {
      if (use_ref) {
        ref::matmul(d, a, b, bias, c);
      } else {
        matmul(d, a, b, bias, c);
      }
      ADD_FAILURE() << "no exception for " << describe(d);
    } catch (const E& e) {
      EXPECT_EQ(std::string(e.what()).rfind("matmul: ", 0), 0u) << e.what();
    }
  }
}

TEST(MatmulErrors, BadDescThrowsTypedErrorNamingMatmul) {
  std::vector<float> buf(64, 1.0f);
  float* p = buf.data();
  MatmulDesc d;
  d.m = -1, d.n = 2, d.k = 2;
  expect_matmul_error<ShapeError>(d, p, p, nullptr, p);
  d.m = 2, d.k = -3;
  expect_matmul_error<ShapeError>(d, p, p, nullptr, p);
  d.k = 2;
  d.dtype = DType::bf16, d.c_dtype = DType::f16;  // bf16 inputs may give bf16 or f32, not f16
  expect_matmul_error<DTypeError>(d, p, p, nullptr, p);
  d.c_dtype = DType::bf16, d.has_bias = true, d.bias_dtype = DType::f16;
  expect_matmul_error<DTypeError>(d, p, p, p, p);
  d.dtype = DType::f32, d.c_dtype = DType::bf16, d.has_bias = false;
  expect_matmul_error<DTypeError>(d, p, p, nullptr, p);
  d.c_dtype = static_cast<DType>(9);
  expect_matmul_error<DTypeError>(d, p, p, nullptr, p);
  d.c_dtype = DType::f32;
  expect_matmul_error<ValueError>(d, nullptr, p, nullptr, p);
  expect_matmul_error<ValueError>(d, p, p, nullptr, nullptr);
  d.has_bias = true, d.bias_dtype = DType::f32;
  expect_matmul_error<ValueError>(d, p, p, nullptr, p);
}

TEST(MatmulCache, SecondCallWithTheSameShapeHitsTheCache) {
  if (reference_forced()) GTEST_SKIP() << "MIXPREC_MATMUL=ref";
  matmul_cache_clear();
  EXPECT_EQ(matmul_cache_size(), 0u);
  MatmulDesc d;
  d.m = 7, d.n = 9, d.k = 11;
  std::vector<float> a(77, 1.0f), b(99, 1.0f), c(63, 0.0f);
  const std::uint64_t hits = matmul_cache_hits();
  matmul(d, a.data(), b.data(), nullptr, c.data());
  EXPECT_EQ(matmul_cache_size(), 1u);
  EXPECT_EQ(matmul_cache_hits(), hits);
  matmul(d, a.data(), b.data(), nullptr, c.data());
  EXPECT_EQ(matmul_cache_size(), 1u);
  EXPECT_EQ(matmul_cache_hits(), hits + 1);
  EXPECT_EQ(c[0], 11.0f);
  d.post_op = MatmulPostOp::relu;  // a different key
  matmul(d, a.data(), b.data(), nullptr, c.data());
  EXPECT_EQ(matmul_cache_size(), 2u);
  EXPECT_EQ(matmul_cache_hits(), hits + 1);
}

TEST(MatmulCache, StaysBoundedAndEvictsLeastRecentlyUsed) {
  if (reference_forced()) GTEST_SKIP() << "MIXPREC_MATMUL=ref";
  matmul_cache_clear();
  std::vector<float> a(300, 1.0f), b(300, 1.0f), c(300, 0.0f);
  MatmulDesc d;
  d.m = 1, d.n = 1;
  for (std::int64_t k = 1; k <= 300; ++k) {
    d.k = k;
    matmul(d, a.data(), b.data(), nullptr, c.data());
    EXPECT_EQ(c[0], static_cast<float>(k));
  }
  EXPECT_LE(matmul_cache_size(), 256u);
  const std::uint64_t hits = matmul_cache_hits();
  d.k = 300;  // most recent: still cached
  matmul(d, a.data(), b.data(), nullptr, c.data());
  EXPECT_EQ(matmul_cache_hits(), hits + 1);
  d.k = 1;  // least recent: evicted
  matmul(d, a.data(), b.data(), nullptr, c.data());
  EXPECT_EQ(matmul_cache_hits(), hits + 1);
  matmul_cache_clear();
}

TEST(MatmulThreads, ConcurrentCallsAgreeWithReference) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      MatmulDesc d;
      d.m = 20 + t, d.n = 40, d.k = 33;
      d.dtype = kDTypes[t % 3], d.c_dtype = d.dtype;
      d.has_bias = true, d.bias_dtype = DType::f32;
      for (int rep = 0; rep < 5; ++rep) compare_with_reference(d, 9000 + 10 * t + rep);
    });
  }
  for (std::thread& th : threads) th.join();
}

TEST(MatmulVerbose, LogsTheImplementationThatRan) {
  if (reference_forced()) GTEST_SKIP() << "MIXPREC_MATMUL=ref";
  const bool was = verbose_enabled();
  set_verbose(true);
  MatmulDesc d;
  d.m = 4, d.n = 4, d.k = 4;
  d.dtype = DType::f16, d.c_dtype = DType::f16;
  const Buf a(DType::f16, std::vector<float>(16, 1.0f)), b = a;
  Buf c(DType::f16, std::vector<float>(16, 0.0f));
  testing::internal::CaptureStderr();
  matmul(d, a.data(), b.data(), nullptr, c.data());
  const std::string log = testing::internal::GetCapturedStderr();
  set_verbose(was);
  EXPECT_NE(log.find("mixprec: matmul f16: ran f16->f32 + onednn:"), std::string::npos) << log;
  EXPECT_NE(log.find("round to f16"), std::string::npos) << log;
  EXPECT_EQ(c.get(0), 4.0f);
}

TEST(MatmulVerbose, Bf16RouteShowsInTheLog) {
  if (reference_forced()) GTEST_SKIP() << "MIXPREC_MATMUL=ref";
  const bool was = verbose_enabled();
  MatmulDesc d;
  d.m = 4, d.n = 4, d.k = 4;
  d.dtype = DType::bf16, d.c_dtype = DType::bf16;
  const Buf a(DType::bf16, std::vector<float>(16, 1.0f)), b = a;
  Buf c(DType::bf16, std::vector<float>(16, 0.0f));
  std::string log_native, log_widen;
  set_verbose(true);
  {
    const Bf16Route scoped(MatmulBf16Route::native);
    testing::internal::CaptureStderr();
    matmul(d, a.data(), b.data(), nullptr, c.data());
    log_native = testing::internal::GetCapturedStderr();
  }
  {
    const Bf16Route scoped(MatmulBf16Route::widen);
    testing::internal::CaptureStderr();
    matmul(d, a.data(), b.data(), nullptr, c.data());
    log_widen = testing::internal::GetCapturedStderr();
  }
  set_verbose(was);
  // oneDNN 2.6 has bf16 GEMMs on AVX-512 CPUs (native with AVX512_BF16, emulated without);
  // on AVX2-only x86 and on arm64 it has none, so the native route must say so and widen. What
  // oneDNN can do depends on the level that executes (cpu_class_expect.h), not on the profile.
  if (ctest::expected_onednn_bf16_gemm()) {
    EXPECT_NE(log_native.find("mixprec: matmul bf16: ran onednn:"), std::string::npos)
        << log_native;
  } else {
    EXPECT_NE(log_native.find("mixprec: matmul bf16: ran bf16->f32 + onednn:"), std::string::npos)
        << log_native;
    EXPECT_NE(log_native.find("skipped: onednn bf16 primitive:"), std::string::npos) << log_native;
    EXPECT_NE(log_native.find("is reference-only or missing"), std::string::npos) << log_native;
  }
  EXPECT_NE(log_widen.find("mixprec: matmul bf16: ran bf16->f32 + onednn:"), std::string::npos)
      << log_widen;
  EXPECT_NE(log_widen.find("round to bf16"), std::string::npos) << log_widen;
  EXPECT_EQ(c.get(0), 4.0f);
}

}  // namespace
}  // namespace mixprec::kernels
