// Reductions: kernels::reduce against kernels::ref::reduce for every op, dtype and layout
// (last axis, whole tensor, columns), at every SIMD level this CPU supports (each runs a
// different Highway target, scalar included): bit-exact on data whose sums are exact in f32 (so
// any summation order gives the same bits, and a lost or doubled element shows), within a
// rounding bound on general data, max/min/amax bit-exact always (signed zeros and NaN payloads
// included); known answers, NaN/Inf propagation, empty axes, the verbose log, and independence
// from the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/reduce.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;

constexpr ReduceOp kOps[] = {ReduceOp::sum,  ReduceOp::mean,  ReduceOp::max,  ReduceOp::min,
                             ReduceOp::amax, ReduceOp::norm1, ReduceOp::norm2};

struct Extent {
  std::int64_t outer, n, inner;
};
// Last axis (inner == 1) with lengths around the vector widths (1..16 lanes, 4 accumulators:
// 7, 9, 31, 33, 63, 65 hit every tail), many short rows (256 x 10), rows long enough to be
// split into 64K chunks, columns (inner > 1) narrower than a vector, with vector tails, with a
// 256-column block and a partial one, long enough to be split along k (1 x 3000 x 300), and
// degenerate extents.
const std::vector<Extent> kExtents = {
    {1, 1, 1},    {1, 7, 1},       {1, 9, 1},      {1, 15, 1},    {1, 17, 1},  {3, 31, 1},
    {2, 33, 1},   {2, 63, 1},      {1, 65, 1},     {1, 1000, 1},  {1, 70001, 1}, {3, 1000, 1},
    {256, 10, 1}, {1, 200000, 1},  {2, 70001, 1},  {2, 17, 1000}, {1, 64, 300}, {3, 15, 17},
    {5, 1, 7},    {2, 40, 3},      {1, 3000, 300}, {1, 30000, 5}, {0, 5, 5},   {4, 3, 0},
    {2, 5, 33}};

bool max_like(ReduceOp op) {
  return op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::amax;
}

std::string label(ReduceOp op, DType in, DType out, const Extent& e, Isa isa) {
  return std::string(name(op)) + " " + name(in) + "->" + name(out) + " [" +
         std::to_string(e.outer) + "," + std::to_string(e.n) + "," + std::to_string(e.inner) +
         "] isa=" + name(isa);
}

/// Multiples of 1/16 in [-1/2, 1/2]: exact in every dtype. Every partial sum of up to 200000
/// of them (or of their magnitudes) is a multiple of 1/16 below 2^20, and of their squares a
/// multiple of 1/256 below 2^16: all exact in f32 (24-bit significand). So sums do not depend
/// on the order of additions and the vector code must match the reference bit for bit.
Buffer exactly_summable(DType dtype, std::int64_t count, std::uint32_t seed) {
  Buffer b(dtype, count);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-8, 8);
  for (std::int64_t i = 0; i < count; ++i) b.set(i, static_cast<float>(dist(rng)) / 16.0f);
  return b;
}

TEST(ReduceKernels, BitExactWithReferenceOnExactlySummableData) {
  for (DType in : ktest::kAllDTypes) {
    for (const Extent& e : kExtents) {
      const Buffer x = exactly_summable(in, e.outer * e.n * e.inner, 7);
      for (ReduceOp op : kOps) {
        for (DType out : {in, DType::f32}) {
          Buffer want(out, e.outer * e.inner);
          ref::reduce(op, x.data(), in, e.outer, e.n, e.inner, want.data(), out);
          for (Isa isa : ktest::isas_to_test()) {
            ktest::IsaCap cap(isa);
            Buffer got(out, e.outer * e.inner);
            reduce(op, x.data(), in, e.outer, e.n, e.inner, got.data(), out);
            ktest::expect_bitwise(got, want, label(op, in, out, e, isa));
          }
        }
      }
    }
  }
}

// General data: max/min/amax are still exact; sums differ from the reference by reordering
// only (and norm2's fused x*x + acc on FMA targets). Both orders' errors are bounded by
// (n-1) u sum|x| (u = eps/2), so n * eps32 * sum|x| bounds the difference on every target,
// plus one rounding of the output to its dtype.
TEST(ReduceKernels, CloseToReferenceOnGeneralData) {
  const std::vector<Extent> extents = {{1, 1000, 1},  {1, 70001, 1}, {7, 333, 1}, {3, 100, 257},
                                       {1, 300001, 1}, {2, 2000, 9},  {1, 9000, 2}};
  for (DType in : ktest::kAllDTypes) {
    for (const Extent& e : extents) {
      const Buffer x = ktest::random_buffer(in, e.outer * e.n * e.inner, -1.0f, 1.0f, 9);
      for (ReduceOp op : kOps) {
        // sum |x| (or x^2) per output: the scale of any reordering's rounding error.
        std::vector<double> abs_sum(static_cast<std::size_t>(e.outer * e.inner), 0.0);
        for (std::int64_t o = 0; o < e.outer; ++o) {
          for (std::int64_t k = 0; k < e.n; ++k) {
            for (std::int64_t i = 0; i < e.inner; ++i) {
              const double v = x.get((o * e.n + k) * e.inner + i);
              abs_sum[o * e.inner + i] += op == ReduceOp::norm2 ? v * v : std::fabs(v);
            }
          }
        }
        for (DType out : {in, DType::f32}) {
          Buffer want(out, e.outer * e.inner);
          ref::reduce(op, x.data(), in, e.outer, e.n, e.inner, want.data(), out);
          for (Isa isa : ktest::isas_to_test()) {
            ktest::IsaCap cap(isa);
            Buffer got(out, e.outer * e.inner);
            reduce(op, x.data(), in, e.outer, e.n, e.inner, got.data(), out);
            const std::string what = label(op, in, out, e, isa);
            if (max_like(op)) {
              ktest::expect_bitwise(got, want, what);
              continue;
            }
            const double e32 = ktest::eps(DType::f32), eo = ktest::eps(out);
            ktest::expect_close(got, want, [&](std::int64_t i) {
              double t = e.n * e32 * abs_sum[i];
              if (op == ReduceOp::mean) t /= e.n;
              if (op == ReduceOp::norm2) t = std::sqrt(t);  // |sqrt(a) - sqrt(b)| <= sqrt|a-b|
              return t + std::fabs(want.get(i)) * eo;
            }, what);
          }
        }
      }
    }
  }
}

TEST(ReduceKnownAnswers, SumOf1024Bf16OnesIsExactly1024) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType in : ktest::kAllDTypes) {
      Buffer ones(in, 1024);
      for (std::int64_t i = 0; i < 1024; ++i) ones.set(i, 1.0f);
      for (DType out : {in, DType::f32}) {
        Buffer s(out, 1);
        reduce(ReduceOp::sum, ones.data(), in, 1, 1024, 1, s.data(), out);
        EXPECT_EQ(s.get(0), 1024.0f) << name(in) << "->" << name(out) << " " << name(isa);
      }
    }
  }
}

// A bf16 running sum would stall at 256 (256 + 1 rounds back to 256); the f32 accumulator
// gives the mean to within the f32 rounding of 4096 additions.
TEST(ReduceKnownAnswers, MeanOf4096Bf16ValuesMatchesDoubleMean) {
  const Buffer x = ktest::random_buffer(DType::bf16, 4096, 0.0f, 4.0f, 13);
  double exact = 0;
  for (std::int64_t i = 0; i < 4096; ++i) exact += x.get(i);
  exact /= 4096;
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    float m = 0;
    reduce(ReduceOp::mean, x.data(), DType::bf16, 1, 4096, 1, &m, DType::f32);
    EXPECT_NEAR(m, exact, 4096 * ktest::eps(DType::f32) * exact) << name(isa);
    EXPECT_NEAR(m, exact, 1e-4 * exact) << name(isa);  // what a bf16 accumulator could not do
    Buffer mb(DType::bf16, 1), rounded(DType::bf16, 1);
    reduce(ReduceOp::mean, x.data(), DType::bf16, 1, 4096, 1, mb.data(), DType::bf16);
    rounded.set(0, m);
    EXPECT_EQ(mb.bits(0), rounded.bits(0))
        << "the bf16 mean is the f32 mean rounded once, " << name(isa);
  }
}

TEST(ReduceKnownAnswers, NormsAndExtremes) {
  const float v[] = {3.0f, -4.0f, 0.5f, -0.25f};
  const auto run = [&](ReduceOp op) {
    float r = 0;
    reduce(op, v, DType::f32, 1, 4, 1, &r, DType::f32);
    return r;
  };
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    EXPECT_EQ(run(ReduceOp::sum), -0.75f);
    EXPECT_EQ(run(ReduceOp::mean), -0.1875f);
    EXPECT_EQ(run(ReduceOp::max), 3.0f);
    EXPECT_EQ(run(ReduceOp::min), -4.0f);
    EXPECT_EQ(run(ReduceOp::amax), 4.0f);
    EXPECT_EQ(run(ReduceOp::norm1), 7.75f);
    EXPECT_FLOAT_EQ(run(ReduceOp::norm2), std::sqrt(25.3125f));
  }
}

TEST(ReduceNaN, MaxMinAmaxAndSumsPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : ktest::kAllDTypes) {
      // NaN first, in the middle of a vector, in the masked tail; a row and a column layout.
      for (std::int64_t pos : {0, 40, 99}) {
        for (bool columns : {false, true}) {
          const std::int64_t n = 100, inner = columns ? 19 : 1;
          Buffer x = ktest::random_buffer(dt, n * inner, -1.0f, 1.0f, 3);
          x.set(pos * inner + (columns ? 5 : 0), nan);
          for (ReduceOp op : kOps) {
            Buffer r(DType::f32, inner);
            reduce(op, x.data(), dt, 1, n, inner, r.data(), DType::f32);
            const std::int64_t col = columns ? 5 : 0;
            EXPECT_TRUE(std::isnan(r.get(col)))
                << name(op) << " " << name(dt) << " pos " << pos << " isa " << name(isa);
            if (columns) {
              EXPECT_FALSE(std::isnan(r.get(4))) << "NaN leaked into a neighbouring column";
            }
          }
        }
      }
    }
  }
}

/// A float NaN with a payload (quiet, sign and payload chosen so every dtype keeps them apart).
float nan_with(std::uint32_t payload, bool negative) {
  const std::uint32_t bits = (negative ? 0xffc00000u : 0x7fc00000u) | (payload << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The reference folds in index order: the FIRST NaN wins (amax clears its sign), and of +0 and
// -0 the LAST one met. Vector lanes see elements out of order; the result must still have the
// reference's bits: rows (several NaNs of different payloads, zeros of both signs, in the body
// and in the tail) and columns, every dtype, every target.
TEST(ReduceMaxMin, BitExactWithSignedZerosAndNaNPayloads) {
  const std::vector<Extent> extents = {{3, 37, 1}, {2, 200, 1}, {1, 70001, 1}, {2, 37, 21},
                                       {1, 500, 70}};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType in : ktest::kAllDTypes) {
      for (const Extent& e : extents) {
        const std::int64_t total = e.outer * e.n * e.inner;
        // Zeros of both signs and negative numbers: max (and amax over a zero row) ties.
        Buffer zeros(in, total);
        std::mt19937 rng(5);
        for (std::int64_t i = 0; i < total; ++i) {
          const unsigned r = rng() % 4;
          zeros.set(i, r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? -1.5f : 1.5f);
        }
        Buffer nans = ktest::random_buffer(in, total, -2.0f, 2.0f, 6);
        for (std::int64_t i = 0; i < total; i += 1 + static_cast<std::int64_t>(rng() % 50)) {
          nans.set(i, nan_with(1 + static_cast<std::uint32_t>(rng() % 7), rng() % 2 == 0));
        }
        Buffer neg_zeros(in, total);  // max is 0 everywhere: which zero is last decides the sign
        for (std::int64_t i = 0; i < total; ++i) {
          neg_zeros.set(i, rng() % 3 == 0 ? (rng() % 2 ? 0.0f : -0.0f) : -1.0f);
        }
        Buffer pos_zeros(in, total);  // the same for min
        for (std::int64_t i = 0; i < total; ++i) {
          pos_zeros.set(i, rng() % 3 == 0 ? (rng() % 2 ? 0.0f : -0.0f) : 1.0f);
        }
        for (const Buffer* x : {&zeros, &nans, &neg_zeros, &pos_zeros}) {
          for (ReduceOp op : {ReduceOp::max, ReduceOp::min, ReduceOp::amax}) {
            for (DType out : {DType::f32, in}) {
              Buffer got(out, e.outer * e.inner), want(out, e.outer * e.inner);
              reduce(op, x->data(), in, e.outer, e.n, e.inner, got.data(), out);
              ref::reduce(op, x->data(), in, e.outer, e.n, e.inner, want.data(), out);
              ktest::expect_bitwise(got, want, label(op, in, out, e, isa));
            }
          }
        }
      }
    }
  }
}

// Infinities: a sum meeting +Inf is +Inf, meeting both signs NaN; max/min/amax see them as
// ordinary values; f16 Inf must widen to Inf on every target (not 65536).
TEST(ReduceNaN, InfinitiesLikeTheReference) {
  const float inf = std::numeric_limits<float>::infinity();
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : ktest::kAllDTypes) {
      for (const Extent& e : {Extent{4, 101, 1}, Extent{4, 101, 19}}) {
        Buffer x = ktest::random_buffer(dt, e.outer * e.n * e.inner, -1.0f, 1.0f, 8);
        // Slab 0: +Inf; slab 1: -Inf; slab 2: both; slab 3: none.
        x.set(1 * e.inner + 2 % e.inner, inf);
        x.set((e.n + 99) * e.inner + 3 % e.inner, -inf);
        x.set((2 * e.n + 5) * e.inner + 4 % e.inner, inf);
        x.set((2 * e.n + 50) * e.inner + 4 % e.inner, -inf);
        for (ReduceOp op : kOps) {
          Buffer got(DType::f32, e.outer * e.inner), want(DType::f32, e.outer * e.inner);
          reduce(op, x.data(), dt, e.outer, e.n, e.inner, got.data(), DType::f32);
          ref::reduce(op, x.data(), dt, e.outer, e.n, e.inner, want.data(), DType::f32);
          ktest::expect_close(got, want, 1e-3, 4, label(op, dt, DType::f32, e, isa));
        }
      }
    }
  }
}

// MIXPREC_VERBOSE names the Highway target that ran, at every level (so each level really
// reaches a different compiled target).
TEST(ReduceDispatch, VerboseLogNamesTheHighwayTarget) {
  const float x[4] = {1, 2, 3, 4};
  float r = 0;
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    set_verbose(true);
    testing::internal::CaptureStderr();
    reduce(ReduceOp::norm2, x, DType::f32, 1, 4, 1, &r, DType::f32);
    const std::string log = testing::internal::GetCapturedStderr();
    set_verbose(false);
    EXPECT_NE(log.find(std::string("mixprec: norm2 f32: ran ") + simd_target()), std::string::npos)
        << log;
    if (isa == Isa::scalar) {
      EXPECT_NE(log.find("ran SCALAR"), std::string::npos) << log;
    }
  }
}

TEST(ReduceErrors, EmptyAxis) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    const float dummy = 0;
    float r[3] = {7, 7, 7};
    reduce(ReduceOp::sum, &dummy, DType::f32, 3, 0, 1, r, DType::f32);
    EXPECT_EQ(r[0], 0.0f);
    EXPECT_EQ(r[2], 0.0f);
    reduce(ReduceOp::mean, &dummy, DType::f32, 1, 0, 1, r, DType::f32);
    EXPECT_TRUE(std::isnan(r[0])) << "mean of nothing is 0/0";
    for (ReduceOp op : {ReduceOp::max, ReduceOp::min, ReduceOp::amax}) {
      try {
        reduce(op, &dummy, DType::f32, 1, 0, 1, r, DType::f32);
        ADD_FAILURE() << "expected ValueError for " << name(op);
      } catch (const ValueError& err) {
        EXPECT_EQ(std::string(err.what()).rfind(std::string(name(op)) + ": ", 0), 0u)
            << err.what();
      }
    }
    EXPECT_THROW(reduce(ReduceOp::sum, &dummy, DType::f32, -1, 1, 1, r, DType::f32), ShapeError);
  }
}

// Long rows are cut into fixed 64K-element chunks combined in order, so the bits do not depend
// on how many threads ran (here on data whose sum is not exact in f32).
TEST(ReduceDeterminism, WholeTensorSumDoesNotDependOnThreadCount) {
  const Buffer x = ktest::random_buffer(DType::f32, 300001, -1.0f, 1.0f, 17);
  const int saved = omp_get_max_threads();
  std::vector<float> results;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::norm2}) {
      float r = 0;
      reduce(op, x.data(), DType::f32, 1, 300001, 1, &r, DType::f32);
      results.push_back(r);
      // The column case split along k (partials combined in k order) too.
      std::vector<float> c(7);
      reduce(op, x.data(), DType::f32, 1, 300001 / 7, 7, c.data(), DType::f32);
      results.insert(results.end(), c.begin(), c.end());
    }
  }
  omp_set_num_threads(saved);
  const std::size_t per_run = results.size() / 3;
  for (std::size_t i = per_run; i < results.size(); ++i) {
    EXPECT_EQ(results[i], results[i % per_run]) << i;
  }
}

// The multi-tensor reduction: every run of a batch (mixed dtypes, sizes from 1 to several
// 64K chunks, an empty one for the sums) gets the bits the backend's single reduce gives it
// alone, on the cpu backend (every target) and on the reference.
TEST(ReduceKernels, BatchGivesEachRunTheBitsOfItsOwnReduce) {
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min,
                          ReduceOp::amax, ReduceOp::norm1, ReduceOp::norm2};
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f16};
  for (const ReduceOp op : ops) {
    const bool max_like = op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::amax;
    std::vector<std::int64_t> sizes = {70001, 1, 65536, 65537, 300, 200000, 17};
    if (!max_like) sizes.insert(sizes.begin() + 2, 0);
    std::vector<ktest::Buffer> runs;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      runs.push_back(ktest::random_buffer(dtypes[k % 3], sizes[k], -3.0f, 3.0f,
                                          static_cast<std::uint32_t>(200 + k)));
    }
    const auto each_alone = [&](void (*single)(ReduceOp, const void*, DType, std::int64_t,
                                               std::int64_t, std::int64_t, void*, DType)) {
      std::vector<float> out(runs.size());
      for (std::size_t k = 0; k < runs.size(); ++k) {
        single(op, runs[k].data(), runs[k].dtype(), 1, runs[k].size(), 1, &out[k], DType::f32);
      }
      return out;
    };
    const auto batched = [&](void (*entry)(const ReduceBatch&)) {
      std::vector<float> out(runs.size(), -7.0f);
      ReduceBatch batch{};
      batch.op = op;
      batch.out = out.data();
      for (const ktest::Buffer& x : runs) batch.runs[batch.size++] = {x.data(), x.dtype(), x.size()};
      entry(batch);
      return out;
    };
    const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    EXPECT_TRUE(same_bits(batched(&ref::reduce_batch), each_alone(&ref::reduce))) << name(op) << ", reference";
    for (const Isa isa : ktest::isas_to_test()) {
      ktest::IsaCap cap(isa);
      EXPECT_TRUE(same_bits(batched(&cpu::reduce_batch), each_alone(&cpu::reduce)))
          << name(op) << ", " << mixprec::name(isa) << " (" << simd_target() << ")";
    }
  }
}

}  // namespace
}  // namespace mixprec::kernels
