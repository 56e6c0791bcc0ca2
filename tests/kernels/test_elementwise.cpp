// Elementwise kernels: the cpu backend (Highway, at EVERY SIMD level this CPU supports) against
// kernels::ref for every op, every dtype combination the API allows, sizes around every vector
// width and large ones (threaded), broadcast and strided layouts, backward ops; NaN/Inf/-0
// semantics. The documented ulp bounds of the transcendental functions are measured in
// test_elementwise_accuracy.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;

// Around every vector width (1, 4, 8, 16 f32 lanes), empty, and above kParallelMinWork.
#ifdef MIXPREC_SANITIZER_BUILD
// Sampled where every element costs 20-50x (sanitizers, qemu-aarch64): tails and one
// multi-vector size; the threaded size (70001) still runs on every level in the backend
// conformance harness.
constexpr std::int64_t kSizes[] = {0, 1, 7, 16, 17, 1000};
constexpr std::int64_t kLongRow = 4000;
#else
constexpr std::int64_t kSizes[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 1000, 70001};
constexpr std::int64_t kLongRow = 40000;
#endif
/// Every unary op of the list (mixprec/core/op_list.h).
std::vector<UnaryOp> unary_ops() {
  std::vector<UnaryOp> ops;
  for (const UnaryOpInfo& i : kUnaryOps) ops.push_back(i.op);
  return ops;
}
constexpr DType kDT[] = {DType::f32, DType::bf16, DType::f16};

/// Every (input, output) dtype pair: the API allows any.
std::vector<std::pair<DType, DType>> all_pairs() {
  std::vector<std::pair<DType, DType>> v;
  for (DType i : kDT) {
    for (DType o : kDT) v.emplace_back(i, o);
  }
  return v;
}

/// The documented accuracy (the op list's simd and ref columns): max error in f32 ulps of the
/// exact value, of the vector code on every Highway target and of the reference (glibc), over
/// the domain; null for an exact op (bit-identical to the reference).
struct UlpBound {
  double simd, ref;
};
const UlpBound* ulp_bound(UnaryOp op) {
  static UlpBound bounds[std::size(kUnaryOps)];
  if (info(op).simd_ulps == 0.0) return nullptr;
  UlpBound& b = bounds[static_cast<int>(op)];
  b = {info(op).simd_ulps, info(op).ref_ulps};
  return &b;
}

/// The list's input range for op (positive where the op needs it; gelu reaches its
/// underflowing tail; exp overflows f16 beyond 11).
std::pair<float, float> domain(UnaryOp op) { return {info(op).lo, info(op).hi}; }

std::string label(const char* op, DType in, DType out, std::int64_t n, Isa isa) {
  return std::string(op) + " " + name(in) + "->" + name(out) + " n=" + std::to_string(n) +
         " isa=" + name(isa);
}

/// Tolerance of a transcendental op against the reference. f32 output: both are within their
/// documented ulp bounds of the exact value, an ulp is at most eps |v|, so k = simd + ref ulps,
/// and the same count of subnormal units where results are subnormal. 16-bit output: f32
/// results that close round to the same or an adjacent value, one ulp <= eps |v| apart (k = 1),
/// atol one subnormal unit of the dtype.
void expect_transcendental_close(UnaryOp op, const Buffer& got, const Buffer& want,
                                 const std::string& what) {
  const UlpBound& b = *ulp_bound(op);
  const DType out = want.dtype();
  const double k = out == DType::f32 ? b.simd + b.ref : 1.0;
  ktest::expect_close(got, want, traits(out).min_subnormal * (out == DType::f32 ? k : 1.0), k,
                      what);
}

TEST(ElementwiseUnary, MatchesReferenceForEveryOpDtypePairAndSize) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (UnaryOp op : unary_ops()) {
      for (auto [in_dt, out_dt] : all_pairs()) {
        for (std::int64_t n : kSizes) {
          const auto [lo, hi] = domain(op);
          const Buffer x = ktest::random_buffer(in_dt, n, lo, hi, 17u + static_cast<unsigned>(n));
          Buffer got(out_dt, n), want(out_dt, n);
          const std::int64_t shape[] = {n};
          const std::int64_t strides[] = {1};
          cpu::unary(op, shape, {x.data(), in_dt, strides}, got.data(), out_dt);
          ref::unary(op, shape, {x.data(), in_dt, strides}, want.data(), out_dt);
          const std::string what = label(name(op), in_dt, out_dt, n, isa);
          if (ulp_bound(op) == nullptr) {
            ktest::expect_bitwise(got, want, what);
          } else {
            expect_transcendental_close(op, got, want, what);
          }
        }
      }
    }
  }
}

// The vector path on a permuted 3-d view with a broadcast dimension (gathered rows) against
// explicit index arithmetic and against the reference.
TEST(ElementwiseUnary, StridedAndBroadcastInputFollowsStrides) {
  const std::int64_t d0 = 3, d1 = 5, d2 = 7;
  const Buffer base = ktest::random_buffer(DType::f32, d0 * d2, -4.0f, 4.0f, 5);
  const std::int64_t shape[] = {d0, d1, d2};
  const std::int64_t strides[] = {1, 0, d0};  // element (i, j, k) = base[i + k * d0]
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    Buffer got(DType::bf16, d0 * d1 * d2), want(DType::bf16, d0 * d1 * d2);
    cpu::unary(UnaryOp::square, shape, {base.data(), DType::f32, strides}, got.data(),
               DType::bf16);
    for (std::int64_t i = 0; i < d0; ++i) {
      for (std::int64_t j = 0; j < d1; ++j) {
        for (std::int64_t k = 0; k < d2; ++k) {
          const float v = base.get(i + k * d0);
          want.set((i * d1 + j) * d2 + k, v * v);
        }
      }
    }
    ktest::expect_bitwise(got, want, std::string("strided square isa=") + name(isa));
  }
  // A long strided row (transposed 2-d, more than one gather block per row) and a broadcast
  // inner dimension, every dtype, against the reference.
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : kDT) {
      const std::int64_t r = 3, c = 2500;
      const Buffer x = ktest::random_buffer(dt, r * c, -3.0f, 3.0f, 6);
      for (auto st : {std::array<std::int64_t, 2>{1, r}, std::array<std::int64_t, 2>{1, 0}}) {
        const std::int64_t shape2[] = {r, c};
        Buffer got(dt, r * c), want(dt, r * c);
        cpu::unary(UnaryOp::neg, shape2, {x.data(), dt, st}, got.data(), dt);
        ref::unary(UnaryOp::neg, shape2, {x.data(), dt, st}, want.data(), dt);
        ktest::expect_bitwise(got, want, std::string("strided neg ") + name(dt) +
                                             " stride1=" + std::to_string(st[1]) +
                                             " isa=" + name(isa));
      }
    }
  }
}

/// Special inputs: NaN (both signs), infinities, signed zeros, subnormals, huge values and the
/// thresholds of each function (exp overflow at 88.72, underflow below -103).
std::vector<float> special_values() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  const float den = std::numeric_limits<float>::denorm_min();
  return {nan,   -nan,   inf,     -inf,   0.0f,   -0.0f,  big,    -big,   den,    -den,
          1e-40f, -1e-40f, 1e-30f, -1e-30f, 1.0f,  -1.0f,  0.5f,   -0.5f,  88.0f,  89.0f,
          -88.0f, -89.0f, 100.0f, -100.0f, -110.0f, 20.0f, -20.0f, 1e10f, -1e10f, 3.0f};
}

// Every op on the special values, f32 in and out: NaN where the reference gives NaN, the same
// infinities, the same signed zeros; exact ops bit for bit, the others within their bound.
TEST(ElementwiseUnary, NanInfAndSignedZeroMatchTheReference) {
  const std::vector<float> xs = special_values();
  const std::int64_t n = static_cast<std::int64_t>(xs.size());
  const std::int64_t shape[] = {n}, one[] = {1};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (UnaryOp op : unary_ops()) {
      Buffer x(DType::f32, n), got(DType::f32, n), want(DType::f32, n);
      std::memcpy(x.data(), xs.data(), xs.size() * sizeof(float));
      cpu::unary(op, shape, {x.data(), DType::f32, one}, got.data(), DType::f32);
      ref::unary(op, shape, {x.data(), DType::f32, one}, want.data(), DType::f32);
      const std::string what = std::string(name(op)) + " specials isa=" + name(isa);
      if (ulp_bound(op) == nullptr) {
        ktest::expect_bitwise(got, want, what);
        continue;
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const float g = got.get(i), w = want.get(i);
        EXPECT_EQ(std::isnan(g), std::isnan(w)) << what << " x=" << xs[i] << " " << g << " " << w;
        if (std::isinf(w) || w == 0.0f) {
          EXPECT_EQ(g, w) << what << " x=" << xs[i];
          EXPECT_EQ(std::signbit(g), std::signbit(w)) << what << " x=" << xs[i];
        }
      }
      expect_transcendental_close(op, got, want, what);
    }
  }
}

// In-place calls (out aliasing the input exactly), as in-place tensor ops make them.
TEST(ElementwiseUnary, InPlaceMatchesOutOfPlace) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : kDT) {
      const std::int64_t n = 70001;
      const Buffer x = ktest::random_buffer(dt, n, -3.0f, 3.0f, 31);
      const Buffer b = ktest::random_buffer(dt, n, -3.0f, 3.0f, 32);
      const std::int64_t shape[] = {n}, one[] = {1};
      Buffer want(dt, n), io = x;
      ref::unary(UnaryOp::gelu, shape, {x.data(), dt, one}, want.data(), dt);
      cpu::unary(UnaryOp::gelu, shape, {io.data(), dt, one}, io.data(), dt);
      ktest::expect_close(io, want, traits(dt).min_subnormal * 10, 10.0,
                          std::string("in-place gelu ") + name(dt) + " isa=" + name(isa));
      Buffer io2 = x;
      ref::binary(BinaryOp::sub, shape, {x.data(), dt, one}, {b.data(), dt, one}, want.data(), dt);
      cpu::binary(BinaryOp::sub, shape, {io2.data(), dt, one}, {b.data(), dt, one}, io2.data(), dt);
      ktest::expect_bitwise(io2, want, std::string("in-place sub ") + name(dt) + " isa=" + name(isa));
    }
  }
}

TEST(ElementwiseUnary, ReluOfNanAndNegativeZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : kDT) {
      Buffer x(dt, 17);
      for (std::int64_t i = 0; i < 17; ++i) x.set(i, static_cast<float>(i) - 8.0f);
      x.set(3, nan);
      x.set(8, -0.0f);
      Buffer y(dt, 17);
      const std::int64_t shape[] = {17}, strides[] = {1};
      cpu::unary(UnaryOp::relu, shape, {x.data(), dt, strides}, y.data(), dt);
      EXPECT_TRUE(std::isnan(y.get(3))) << "relu(NaN) must be NaN, " << name(dt);
      EXPECT_FALSE(std::signbit(y.get(8))) << "relu(-0) is +0, " << name(dt);
      EXPECT_EQ(y.get(0), 0.0f);
      EXPECT_EQ(y.get(16), 8.0f);
    }
  }
}

/// Runs cpu::binary and ref::binary on one layout and expects identical bits (the ops are
/// single IEEE operations in both, rounded once to the output dtype).
void check_binary_layout(BinaryOp op, std::span<const std::int64_t> shape, const Buffer& a,
                         std::span<const std::int64_t> sa, const Buffer& b,
                         std::span<const std::int64_t> sb, DType out_dt, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  Buffer got(out_dt, n), want(out_dt, n);
  cpu::binary(op, shape, {a.data(), a.dtype(), sa}, {b.data(), b.dtype(), sb}, got.data(),
              out_dt);
  ref::binary(op, shape, {a.data(), a.dtype(), sa}, {b.data(), b.dtype(), sb}, want.data(),
              out_dt);
  ktest::expect_bitwise(got, want, what);
}

struct Layout {
  const char* name;
  std::vector<std::int64_t> shape, sa, sb;
  std::int64_t na, nb;  // elements the operands' buffers need
};

std::vector<Layout> binary_layouts() {
  std::vector<Layout> layouts;
  for (std::int64_t n : kSizes) {
    layouts.push_back({"contiguous", {n}, {1}, {1}, n, n});
    layouts.push_back({"scalar b", {n}, {1}, {0}, n, 1});
    layouts.push_back({"scalar a", {n}, {0}, {1}, 1, n});
  }
  for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{3, 17}, {40, 1001}, {2, kLongRow}}) {
    layouts.push_back({"row-broadcast b", {r, c}, {c, 1}, {0, 1}, r * c, c});
    layouts.push_back({"row-broadcast a", {r, c}, {0, 1}, {c, 1}, c, r * c});
    layouts.push_back({"column-broadcast b", {r, c}, {c, 1}, {1, 0}, r * c, r});
    layouts.push_back({"column-broadcast a", {r, c}, {1, 0}, {c, 1}, r, r * c});
    layouts.push_back({"transposed a", {r, c}, {1, r}, {c, 1}, r * c, r * c});
  }
  layouts.push_back({"bias over [B,T,C]", {4, 5, 33}, {165, 33, 1}, {0, 0, 1}, 660, 33});
  layouts.push_back({"size-1 dims", {1, 37, 1}, {37, 1, 1}, {0, 1, 5}, 37, 37});
  layouts.push_back({"rank 0", {}, {}, {}, 1, 1});
  layouts.push_back({"empty", {0, 5}, {5, 1}, {0, 1}, 0, 5});
  layouts.push_back({"both scalar", {9}, {0}, {0}, 1, 1});
  layouts.push_back({"both scalar 2-d", {3, 40}, {0, 0}, {0, 0}, 1, 1});
  layouts.push_back({"outer broadcast 3-d", {6, 4, 19}, {0, 19, 1}, {76, 19, 1}, 76, 456});
  layouts.push_back({"strided b, scalar a", {50}, {0}, {3}, 1, 150});
  layouts.push_back({"strided both", {7, 300}, {1, 7}, {600, 2}, 2100, 4200});
  return layouts;
}

TEST(ElementwiseBinary, MatchesReferenceOnEveryLayout) {
  for (const Layout& l : binary_layouts()) {
    for (DType dt : kDT) {
      const Buffer a = ktest::random_buffer(dt, l.na, -10.0f, 10.0f, 3);
      const Buffer b = ktest::random_buffer(dt, l.nb, -10.0f, 10.0f, 4);
      for (Isa isa : ktest::isas_to_test()) {
        ktest::IsaCap cap(isa);
        for (BinaryOp op : kBinaryOps) {
          for (DType out_dt : kDT) {
            check_binary_layout(op, l.shape, a, l.sa, b, l.sb, out_dt,
                                label(name(op), dt, out_dt, l.na, isa) + " " + l.name);
          }
        }
      }
    }
  }
}

// Operands of different dtypes (staged through f32 blocks), every (a, b, out) combination, on
// the contiguous, scalar, broadcast and strided layouts.
TEST(ElementwiseBinary, MixedOperandDtypes) {
  for (const Layout& l : binary_layouts()) {
    const std::string ln = l.name;
    // Runs of 1000-ish elements (several staging blocks, vector tails) and the degenerate
    // layouts; the large threaded ones are covered above.
    const std::int64_t big = std::max(l.na, l.nb);
    if ((big < 1000 || big > 50000) && ln != "rank 0" && ln != "both scalar") continue;
    for (DType da : kDT) {
      for (DType db : kDT) {
        if (da == db) continue;
        const Buffer a = ktest::random_buffer(da, l.na, -10.0f, 10.0f, 5);
        const Buffer b = ktest::random_buffer(db, l.nb, -10.0f, 10.0f, 6);
        for (Isa isa : ktest::isas_to_test()) {
          ktest::IsaCap cap(isa);
          for (BinaryOp op : kBinaryOps) {
            for (DType out : kDT) {
              check_binary_layout(op, l.shape, a, l.sa, b, l.sb, out,
                                  std::string(name(op)) + " " + name(da) + "," + name(db) +
                                      "->" + name(out) + " " + ln + " isa=" + name(isa));
            }
          }
        }
      }
    }
  }
}

// The vector path against explicit index arithmetic for a broadcast that is not a plain
// row/column case (a strided, gathered operand of another dtype).
TEST(ElementwiseBinary, GeneralBroadcastFollowsStrides) {
  const std::int64_t shape[] = {4, 3, 5};
  const std::int64_t sa[] = {5, 0, 1};   // a is [4, 1, 5]
  const std::int64_t sb[] = {0, 1, 3};   // b is [1, 3, 5] stored transposed as [5, 3]
  const Buffer a = ktest::random_buffer(DType::f32, 20, -3.0f, 3.0f, 8);
  const Buffer b = ktest::random_buffer(DType::f16, 15, -3.0f, 3.0f, 9);
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    Buffer got(DType::f32, 60);
    cpu::binary(BinaryOp::sub, shape, {a.data(), DType::f32, sa}, {b.data(), DType::f16, sb},
                got.data(), DType::f32);
    for (std::int64_t i = 0; i < 4; ++i) {
      for (std::int64_t j = 0; j < 3; ++j) {
        for (std::int64_t k = 0; k < 5; ++k) {
          EXPECT_EQ(got.get((i * 3 + j) * 5 + k), a.get(i * 5 + k) - b.get(j + k * 3))
              << "isa=" << name(isa);
        }
      }
    }
  }
}

TEST(ElementwiseBinary, MaximumAndMinimumPropagateNanAndPickLikeTheReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : kDT) {
      Buffer a = ktest::random_buffer(dt, 33, -1.0f, 1.0f, 1);
      Buffer b = ktest::random_buffer(dt, 33, -1.0f, 1.0f, 2);
      a.set(2, nan);   // NaN in the first operand
      b.set(20, nan);  // NaN in the second operand
      a.set(32, nan);
      b.set(32, -nan);  // both NaN: a's (sign) wins
      a.set(5, 0.0f);   // ties of signed zeros: b wins
      b.set(5, -0.0f);
      a.set(6, -0.0f);
      b.set(6, 0.0f);
      const std::int64_t shape[] = {33}, one[] = {1};
      for (BinaryOp op : {BinaryOp::maximum, BinaryOp::minimum}) {
        Buffer got(dt, 33), want(dt, 33);
        cpu::binary(op, shape, {a.data(), dt, one}, {b.data(), dt, one}, got.data(), dt);
        ref::binary(op, shape, {a.data(), dt, one}, {b.data(), dt, one}, want.data(), dt);
        for (std::int64_t i : {2, 20, 32}) {
          EXPECT_TRUE(std::isnan(got.get(i))) << name(op) << " " << name(dt) << " [" << i << "]";
        }
        ktest::expect_bitwise(got, want, std::string(name(op)) + " NaN " + name(dt));
        // NaN as a broadcast scalar, on either side.
        const std::int64_t zero[] = {0};
        cpu::binary(op, shape, {a.data(), dt, one}, {b.data(), dt, zero}, got.data(), dt);
        EXPECT_TRUE(std::isnan(got.get(2))) << name(op) << " " << name(dt);
        ref::binary(op, shape, {a.data(), dt, one}, {b.data(), dt, zero}, want.data(), dt);
        ktest::expect_bitwise(got, want, std::string(name(op)) + " NaN scalar " + name(dt));
        Buffer nan_scalar(dt, 1);
        nan_scalar.set(0, nan);
        cpu::binary(op, shape, {nan_scalar.data(), dt, zero}, {b.data(), dt, one}, got.data(),
                    dt);
        for (std::int64_t i = 0; i < 33; ++i) EXPECT_TRUE(std::isnan(got.get(i)));
      }
    }
  }
}

// Binary ops on infinities, NaN and signed zeros (inf - inf, 0 / 0, x / 0, -0 + -0 ...):
// the same IEEE operations, so the same bits, NaN signs included. Where BOTH operands are NaN,
// IEEE 754 leaves open which one's sign/payload survives (and a compiler may swap the operands
// of a commutative add or mul in the reference), so those pairs must only give a NaN.
TEST(ElementwiseBinary, SpecialValuesBitIdentical) {
  const std::vector<float> sv = special_values();
  std::vector<float> av, bv, an, bn;
  for (float x : sv) {
    for (float y : sv) {
      const bool both_nan = std::isnan(x) && std::isnan(y);
      (both_nan ? an : av).push_back(x);
      (both_nan ? bn : bv).push_back(y);
    }
  }
  auto buffer = [](const std::vector<float>& v) {
    Buffer b(DType::f32, static_cast<std::int64_t>(v.size()));
    std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  const Buffer a = buffer(av), b = buffer(bv), a2 = buffer(an), b2 = buffer(bn);
  const std::int64_t shape[] = {a.size()}, shape2[] = {a2.size()}, one[] = {1};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (BinaryOp op : kBinaryOps) {
      for (DType out : kDT) {
        check_binary_layout(op, shape, a, one, b, one, out,
                            std::string(name(op)) + " specials ->" + name(out) + " isa=" +
                                name(isa));
        Buffer got(out, a2.size());
        cpu::binary(op, shape2, {a2.data(), DType::f32, one}, {b2.data(), DType::f32, one},
                    got.data(), out);
        // Arithmetic propagates NaN; a comparison with NaN is false (0); pow(NaN, NaN) is NaN.
        const bool comparison = op == BinaryOp::eq || op == BinaryOp::ge;
        for (std::int64_t i = 0; i < got.size(); ++i) {
          if (comparison) {
            EXPECT_EQ(got.get(i), 0.0f) << name(op) << " NaN,NaN isa=" << name(isa);
          } else {
            EXPECT_TRUE(std::isnan(got.get(i))) << name(op) << " NaN,NaN isa=" << name(isa);
          }
        }
      }
    }
  }
}

TEST(ElementwiseAffine, BitIdenticalToTheReference) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (auto [in_dt, out_dt] : all_pairs()) {
      for (std::int64_t n : kSizes) {
        const Buffer x = ktest::random_buffer(in_dt, n, -5.0f, 5.0f, 11);
        Buffer got(out_dt, n), want(out_dt, n);
        // alpha * x is inexact for these, so a fused multiply-add would show.
        const float alpha = -1.7f, beta = 0.3f;
        cpu::affine(x.data(), in_dt, got.data(), out_dt, n, alpha, beta);
        ref::affine(x.data(), in_dt, want.data(), out_dt, n, alpha, beta);
        ktest::expect_bitwise(got, want, label("affine", in_dt, out_dt, n, isa));
      }
    }
  }
}

TEST(ElementwiseFill, RoundsOnceAndFillsEveryElement) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : kDT) {
      for (float value : {0.1f, -0.0f, 70000.0f, 1e-7f, std::numeric_limits<float>::quiet_NaN()}) {
        for (std::int64_t n : kSizes) {
          Buffer got(dt, n), want(dt, n);
          cpu::fill(got.data(), dt, n, value);
          ref::fill(want.data(), dt, n, value);
          ktest::expect_bitwise(got, want, label("fill", dt, dt, n, isa));
          if (n == 0) continue;
          Buffer one(dt, 1);
          one.set(0, value);
          EXPECT_EQ(got.bits(n - 1), one.bits(0));
        }
      }
    }
  }
}

// Stores round to nearest even bit-identically to half.h on every target: every bf16/f16
// rounding case (ties both ways, carries into the exponent, overflow to Inf, f16 subnormals
// and underflow, NaN payloads, a signalling NaN). abs of these non-negative values is the
// identity and neg only flips the sign, so each call is a pure f32 -> 16-bit conversion.
TEST(ElementwiseUnary, RoundingToSixteenBitsIsBitIdentical) {
  std::vector<float> xs;
  for (std::uint32_t u = 0; u < 0x7fffffffu; u += 0x7ff3) {  // every exponent, many mantissas
    float f;
    std::memcpy(&f, &u, 4);
    xs.push_back(f);
    const std::uint32_t tie = (u & ~0xffffu) | 0x8000u, tie13 = (u & ~0x1fffu) | 0x1000u;
    std::memcpy(&f, &tie, 4);
    xs.push_back(f);
    std::memcpy(&f, &tie13, 4);
    xs.push_back(f);
  }
  for (float f : {65504.0f, 65519.0f, 65520.0f, 1e-8f, 2.9802322e-8f, 2.9802326e-8f,
                  std::numeric_limits<float>::infinity()}) {
    xs.push_back(f);
  }
  const std::uint32_t snan = 0x7f800001u, qnan_payload = 0x7fc12345u;
  float f;
  std::memcpy(&f, &snan, 4);
  xs.push_back(f);
  std::memcpy(&f, &qnan_payload, 4);
  xs.push_back(f);
  const std::int64_t n = static_cast<std::int64_t>(xs.size());
  Buffer x(DType::f32, n);
  std::memcpy(x.data(), xs.data(), xs.size() * 4);
  const std::int64_t shape[] = {n}, one[] = {1};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType out : {DType::bf16, DType::f16}) {
      for (UnaryOp op : {UnaryOp::abs, UnaryOp::neg}) {
        Buffer got(out, n), want(out, n);
        cpu::unary(op, shape, {x.data(), DType::f32, one}, got.data(), out);
        ref::unary(op, shape, {x.data(), DType::f32, one}, want.data(), out);
        ktest::expect_bitwise(got, want, std::string("f32->") + name(out) + " " + name(op) +
                                             " isa=" + name(isa));
      }
    }
  }
}

// Loads widen exactly on every target: every 16-bit pattern (f16 subnormals, Inf, signalling
// and quiet NaNs with payloads) through neg, f32 out.
TEST(ElementwiseUnary, WideningEverySixteenBitPatternIsExact) {
  const std::int64_t n = 65536;
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType in : {DType::bf16, DType::f16}) {
      Buffer x(in, n);
      for (std::int64_t i = 0; i < n; ++i) {
        const auto u = static_cast<std::uint16_t>(i);
        std::memcpy(static_cast<char*>(x.data()) + 2 * i, &u, 2);
      }
      const std::int64_t shape[] = {n}, one[] = {1};
      for (DType out : kDT) {
        Buffer got(out, n), want(out, n);
        cpu::unary(UnaryOp::neg, shape, {x.data(), in, one}, got.data(), out);
        ref::unary(UnaryOp::neg, shape, {x.data(), in, one}, want.data(), out);
        ktest::expect_bitwise(got, want, std::string(name(in)) + "->" + name(out) +
                                             " all patterns isa=" + name(isa));
      }
    }
  }
}

/// gelu'(x) dy = (Phi + x phi) dy with the vector erfc/exp: Phi + x phi cancels near
/// x = -0.75, so the bound scales with |dy| (Phi + |x| phi) (each term within the gelu bound of
/// both implementations), not with the result; subnormal results (x < -13) get 16 units.
/// gelu_tanh'(x) dy = s (1 + x w' e s) dy cancels likewise; the two implementations share every
/// operation but exp (w, w', x w' are the same bits), so they differ by the exp error carried
/// through s and e s: a few ulps of each term, s and |x w'| e s^2 (k = 8 covers it).
void expect_gelu_grad_close(UnaryOp op, const Buffer& v, const Buffer& dy, const Buffer& got,
                            const Buffer& want, const std::string& what) {
  const DType out = want.dtype();
  const double k = op == UnaryOp::gelu
                       ? ulp_bound(UnaryOp::gelu)->simd + ulp_bound(UnaryOp::gelu)->ref + 1.0
                       : 8.0;
  const double e = ktest::eps(out), e32 = ktest::eps(DType::f32);
  ktest::expect_close(got, want, [&](std::int64_t i) {
    const double xi = v.get(i);
    double terms;
    if (op == UnaryOp::gelu) {
      const double cdf = 0.5 * std::erfc(-xi / std::sqrt(2.0));
      const double pdf = std::exp(-0.5 * xi * xi) / std::sqrt(2.0 * std::numbers::pi);
      terms = cdf + std::fabs(xi) * pdf;
    } else if (op == UnaryOp::silu) {  // s + |x| s (1 - s): the two terms of s (1 + x (1 - s))
      const double sg = 1.0 / (1.0 + std::exp(-xi));
      terms = sg + std::fabs(xi) * sg * (1.0 - sg);
    } else if (op == UnaryOp::gelu_tanh) {
      const double c1 = 2.0 * std::sqrt(2.0 / std::numbers::pi), c2 = 0.044715 * c1;
      const double w = xi * (c1 + c2 * xi * xi), ex = std::exp(-w), sg = 1.0 / (1.0 + ex);
      terms = sg + std::fabs(xi * (c1 + 3.0 * c2 * xi * xi)) * ex * sg * sg;
    } else {
      ADD_FAILURE() << name(op) << ": an approximate gradient (grad column ulps) needs its terms "
                    << "here, the magnitudes its cancellation is bounded by";
      terms = 0;
    }
    return std::fabs(dy.get(i)) * terms * k * e32 +
           std::fabs(want.get(i)) * (out == DType::f32 ? 0.0 : e) +
           traits(out).min_subnormal * 16;
  }, what);
}

TEST(ElementwiseUnaryBackward, MatchesReferenceAndReadsOnlyItsOperand) {
  // (v, dy, dx) dtypes: every (in, out) pair with v and dy alike, and mixed v/dy.
  std::vector<std::array<DType, 3>> combos;
  for (auto [i, o] : all_pairs()) combos.push_back({i, i, o});
  combos.push_back({DType::f32, DType::bf16, DType::f32});
  combos.push_back({DType::bf16, DType::f32, DType::bf16});
  combos.push_back({DType::f16, DType::bf16, DType::f16});
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (UnaryOp op : unary_ops()) {
      for (auto [v_dt, g_dt, out_dt] : combos) {
        for (std::int64_t n : kSizes) {
          const auto [lo, hi] = domain(op);
          const Buffer v = ktest::random_buffer(v_dt, n, lo, hi, 21);
          const Buffer dy = ktest::random_buffer(g_dt, n, -2.0f, 2.0f, 22);
          Buffer got(out_dt, n), want(out_dt, n);
          // The operand the formula does not read is passed as null: it must not be touched.
          const void* x = grad_reads_x(op) ? v.data() : nullptr;
          const void* y = grad_reads_x(op) ? nullptr : v.data();
          cpu::unary_backward(op, x, v_dt, y, v_dt, dy.data(), g_dt, got.data(), out_dt, n);
          ref::unary_backward(op, x, v_dt, y, v_dt, dy.data(), g_dt, want.data(), out_dt, n);
          const std::string what = label(name(op), v_dt, out_dt, n, isa) + " dy " +
                                   name(g_dt) + " backward";
          if (info(op).grad_exact) {
            ktest::expect_bitwise(got, want, what);  // the reference's IEEE operations
          } else {
            expect_gelu_grad_close(op, v, dy, got, want, what);
          }
        }
      }
    }
  }
}

// d op(x)/dx from unary_backward against central differences of the forward kernel (f32),
// evaluated in double: (f(x+) - f(x-)) / (x+ - x-) with x+- the f32 neighbours actually used.
// With h = 1e-3, f32 rounding of f contributes ~eps|f|/2h ~ 1e-4 |f| and truncation h^2 f'''/6
// < 1e-5 relative at these points, so 1e-3 relative + 1e-4 absolute is meaningful (a wrong
// formula is off by O(1)).
TEST(ElementwiseUnaryBackward, FiniteDifferencesOfTheForwardKernel) {
  const std::vector<float> general = {-2.3f, -0.7f, -0.15f, 0.2f, 0.9f, 1.7f, 3.1f};
  const std::vector<float> positive = {0.3f, 0.9f, 1.7f, 3.1f, 7.5f};
  const double h = 1e-3;
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (UnaryOp op : unary_ops()) {
      const bool pos = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt;
      const std::vector<float>& pts = pos ? positive : general;
      const std::int64_t n = static_cast<std::int64_t>(pts.size());
      std::vector<float> x(pts), xp(n), xm(n), y(n), fp(n), fm(n), dy(n, 0.75f), dx(n);
      for (std::int64_t i = 0; i < n; ++i) {
        xp[i] = static_cast<float>(x[i] + h);
        xm[i] = static_cast<float>(x[i] - h);
      }
      const std::int64_t shape[] = {n}, one[] = {1};
      auto forward = [&](const std::vector<float>& in, std::vector<float>& out) {
        cpu::unary(op, shape, {in.data(), DType::f32, one}, out.data(), DType::f32);
      };
      forward(x, y);
      forward(xp, fp);
      forward(xm, fm);
      cpu::unary_backward(op, x.data(), DType::f32, y.data(), DType::f32, dy.data(), DType::f32,
                          dx.data(), DType::f32, n);
      for (std::int64_t i = 0; i < n; ++i) {
        const double fd = 0.75 * (static_cast<double>(fp[i]) - fm[i]) /
                          (static_cast<double>(xp[i]) - xm[i]);
        EXPECT_NEAR(dx[i], fd, 1e-4 + 1e-3 * std::fabs(fd))
            << name(op) << " at x=" << x[i] << " isa=" << name(isa);
      }
    }
  }
}

TEST(ElementwiseDispatch, VerboseLogNamesTheTargetAndWhyFp8IsRefused) {
  const float x[6] = {1, 2, 3, 4, 5, 6};
  float y[6];
  const std::int64_t shape[] = {2, 3}, contiguous[] = {3, 1}, transposed[] = {1, 2};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    set_verbose(true);
    testing::internal::CaptureStderr();
    cpu::unary(UnaryOp::exp, shape, {x, DType::f32, contiguous}, y, DType::f32);
    cpu::unary(UnaryOp::exp, shape, {x, DType::f32, transposed}, y, DType::f32);
    std::uint8_t f8[6] = {};
    EXPECT_THROW(cpu::unary(UnaryOp::neg, shape, {f8, DType::f8e4m3, contiguous}, f8,
                            DType::f8e4m3),
                 DTypeError);  // the fp8 fallback itself: BackendFallback.CpuSendsFp8ComputeToTheReference
    const std::string log = testing::internal::GetCapturedStderr();
    set_verbose(false);
    const std::string ran = std::string("mixprec: exp f32: ran ") + simd_target();
    EXPECT_NE(log.find(ran), std::string::npos) << log;
    EXPECT_EQ(log.find("exp f32: ran reference"), std::string::npos) << log;
  }
}

TEST(ElementwiseErrors, ShapeMismatchThrowsShapeError) {
  const float x[4] = {1, 2, 3, 4};
  float y[4];
  const std::int64_t shape[] = {2, 2}, strides[] = {1};
  EXPECT_THROW(cpu::unary(UnaryOp::neg, shape, {x, DType::f32, strides}, y, DType::f32),
               ShapeError);
  EXPECT_THROW(ref::unary(UnaryOp::neg, shape, {x, DType::f32, strides}, y, DType::f32),
               ShapeError);
}

}  // namespace
}  // namespace mixprec::kernels
