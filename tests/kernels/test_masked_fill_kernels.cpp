// masked_fill kernel: the cpu backend (Highway, at EVERY SIMD level this CPU supports) against
// kernels::ref bit for bit, for every (x, mask) dtype pair and the mask layouts attention uses
// (contiguous, a causal [T, T] broadcast over batch and heads, a broadcast inner dimension, a
// transposed mask), sizes around the vector widths and above the parallel threshold; NaN masks
// select and x's NaN payloads survive; in place.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/masked_fill.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;

constexpr DType kDT[] = {DType::f32, DType::bf16, DType::f16};

/// A 0/1 mask of n elements (about a third selected), with a NaN (which selects) at 5.
Buffer mask_buffer(DType dt, std::int64_t n, std::uint32_t seed) {
  Buffer m = ktest::random_buffer(dt, n, 0.0f, 3.0f, seed);
  for (std::int64_t i = 0; i < n; ++i) m.set(i, m.get(i) >= 2.0f ? 1.0f : 0.0f);
  if (n > 5) m.set(5, std::numeric_limits<float>::quiet_NaN());
  return m;
}

struct Layout {
  const char* name;
  std::vector<std::int64_t> shape, mask_shape, mask_strides;
};

std::vector<Layout> layouts() {
  return {
      {"flat", {70001}, {70001}, {1}},
      {"flat_small", {13}, {13}, {1}},
      {"causal_bhtt", {2, 3, 17, 17}, {17, 17}, {0, 0, 17, 1}},
      {"row_broadcast", {37, 129}, {37}, {1, 0}},
      {"transposed", {33, 65}, {65, 33}, {1, 33}},
      {"long_rows_strided", {3, 40000}, {40000, 3}, {1, 3}},
      {"scalar", {5, 7}, {1}, {0, 0}},
  };
}

TEST(MaskedFillKernel, MatchesTheReferenceBitForBitOnEveryTarget) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : kDT) {
      for (DType mdt : kDT) {
        for (const Layout& l : layouts()) {
          std::int64_t n = 1, nm = 1;
          for (auto d : l.shape) n *= d;
          for (auto d : l.mask_shape) nm *= d;
          Buffer x = ktest::random_buffer(dt, n, -4.0f, 4.0f, 7);
          std::memset(x.data(), 0xff, size_of(dt));  // a NaN with a payload must survive
          const Buffer m = mask_buffer(mdt, nm, 8);
          Buffer got(dt, n), want(dt, n);
          const StridedInput mi{m.data(), mdt, l.mask_strides};
          cpu::masked_fill(l.shape, x.data(), dt, mi, -1e4f, got.data());
          ref::masked_fill(l.shape, x.data(), dt, mi, -1e4f, want.data());
          const std::string what = std::string(l.name) + " x " + name(dt) + " mask " + name(mdt) +
                                   " isa=" + name(isa);
          ktest::expect_bitwise(got, want, what);
          Buffer io = x;  // in place
          cpu::masked_fill(l.shape, io.data(), dt, mi, -1e4f, io.data());
          ktest::expect_bitwise(io, want, what + " in place");
        }
      }
    }
  }
}

TEST(MaskedFillKernel, SelectsWhereTheMaskIsNonzeroOrNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> m = {0, 1, -0.0f, nan, -2, 0};
  const std::vector<std::int64_t> shape = {6}, one = {1};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (auto* fn : {&cpu::masked_fill, &ref::masked_fill}) {
      std::vector<float> y(6);
      fn(shape, x.data(), DType::f32, {m.data(), DType::f32, one}, -inf, y.data());
      EXPECT_EQ(y, (std::vector<float>{1, -inf, 3, -inf, -inf, 6})) << name(isa);
    }
  }
  // The value is rounded once to x's dtype: -1e9 is -Inf in f16.
  Buffer xh(DType::f16, 1), yh(DType::f16, 1);
  const float sel = 1.0f;
  cpu::masked_fill(std::vector<std::int64_t>{1}, xh.data(), DType::f16,
                   {&sel, DType::f32, std::vector<std::int64_t>{1}}, -1e9f, yh.data());
  EXPECT_EQ(yh.get(0), -inf);
}

TEST(MaskedFillKernel, BadStridesAndFp8AreRefused) {
  const float x[4] = {}, m[4] = {};
  float y[4];
  const std::vector<std::int64_t> shape = {2, 2}, bad = {1};
  EXPECT_THROW(cpu::masked_fill(shape, x, DType::f32, {m, DType::f32, bad}, 0.0f, y), ShapeError);
  EXPECT_THROW(ref::masked_fill(shape, x, DType::f32, {m, DType::f32, bad}, 0.0f, y), ShapeError);
  const std::uint8_t f8[4] = {};
  const std::vector<std::int64_t> ok = {2, 1};
  EXPECT_THROW(cpu::masked_fill(shape, x, DType::f32, {f8, DType::f8e4m3, ok}, 0.0f, y),
               DTypeError);
}

}  // namespace
}  // namespace mixprec::kernels
