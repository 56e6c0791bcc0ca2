// kernels::conv2d* (oneDNN, every route and layout) against the reference loops, and the
// pooling kernels against hand-computed values and the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;
using ktest::random_buffer;

struct Shape4 {
  std::int64_t n, c, h, w, o, kh, kw, stride, padding;
};

// Small shapes covering padding, stride 2 and 3, 1x1, a rectangular kernel, odd sizes, C=1
// (the CNN's first layer) and enough channels for oneDNN's blocked kernels.
const Shape4 kShapes[] = {
    {2, 3, 7, 7, 4, 3, 3, 1, 1},   {2, 4, 9, 8, 5, 3, 3, 2, 1},  {3, 5, 6, 6, 7, 1, 1, 1, 0},
    {2, 1, 12, 12, 8, 3, 3, 1, 1}, {2, 16, 6, 6, 32, 3, 3, 1, 1}, {2, 3, 11, 11, 4, 3, 3, 3, 0},
    {1, 3, 8, 6, 4, 3, 2, 1, 1},   {2, 2, 5, 5, 3, 5, 5, 1, 2},
};

Conv2dDesc make_desc(const Shape4& s, DType t, bool bias, DType bias_dtype) {
  Conv2dDesc d;
  d.n = s.n, d.c = s.c, d.h = s.h, d.w = s.w, d.o = s.o, d.kh = s.kh, d.kw = s.kw;
  d.stride = s.stride, d.padding = s.padding;
  d.dtype = t;
  d.has_bias = bias;
  d.bias_dtype = bias_dtype;
  return d;
}

std::string describe(const Conv2dDesc& d) {
  return std::string(name(d.dtype)) + " x[" + std::to_string(d.n) + "," + std::to_string(d.c) +
         "," + std::to_string(d.h) + "," + std::to_string(d.w) + "] w[" + std::to_string(d.o) +
         "," + std::to_string(d.c) + "," + std::to_string(d.kh) + "," + std::to_string(d.kw) +
         "] s" + std::to_string(d.stride) + " p" + std::to_string(d.padding) +
         (d.has_bias ? std::string(" bias ") + name(d.bias_dtype) : std::string());
}

// The same values widened to f32 and made non-negative: running the reference on these gives,
// per output, S = sum |a * b| (+ |bias|), the scale of its f32 summation error.
Buffer abs_f32(const Buffer& b) {
  Buffer out(DType::f32, b.size());
  for (std::int64_t i = 0; i < b.size(); ++i) out.set(i, std::fabs(b.get(i)));
  return out;
}

// Both sides sum the same exact products (16-bit products are exact in f32) in f32 but in a
// different order, so before rounding they differ by at most ~K * eps(f32) * S for K terms
// (the deterministic gamma_K bound). Rounding to the dtype can then put the two on adjacent
// values: 2 * eps(dtype) * |ref| (the 2 covers a binade crossing). min_subnormal covers
// underflow. A wrong tap, stride, padding or layout gives errors of order S, far above this.
void expect_conv_close(const Buffer& got, const Buffer& want, const Buffer& abs_sum,
                       std::int64_t terms, const std::string& what) {
  const double e32 = ktest::eps(DType::f32), e = ktest::eps(want.dtype());
  const double sub = traits(want.dtype()).min_subnormal;
  ktest::expect_close(got, want,
                      [&](std::int64_t i) {
                        return static_cast<double>(terms) * e32 * abs_sum.get(i) +
                               2 * e * std::fabs(want.get(i)) + sub;
                      },
                      what);
}

// Runs all three passes through kernels:: and ref:: on the same random operands.
void check_all_passes(const Conv2dDesc& d, std::uint32_t seed) {
  SCOPED_TRACE(describe(d));
  const std::int64_t ho = d.out_h(), wo = d.out_w();
  const std::int64_t nx = d.n * d.c * d.h * d.w, nw = d.o * d.c * d.kh * d.kw,
                     ny = d.n * d.o * ho * wo;
  const Buffer x = random_buffer(d.dtype, nx, -1, 1, seed);
  const Buffer w = random_buffer(d.dtype, nw, -1, 1, seed + 1);
  const Buffer b = random_buffer(d.bias_dtype, d.o, -1, 1, seed + 2);
  const Buffer dy = random_buffer(d.dtype, ny, -1, 1, seed + 3);
  const Buffer ax = abs_f32(x), aw = abs_f32(w), ab = abs_f32(b), ady = abs_f32(dy);
  Conv2dDesc a = d;  // the same problem in f32 on absolute values
  a.dtype = DType::f32;
  a.bias_dtype = DType::f32;

  Buffer y(d.dtype, ny), y_ref(d.dtype, ny), y_abs(DType::f32, ny);
  conv2d(d, x.data(), w.data(), b.data(), y.data());
  ref::conv2d(d, x.data(), w.data(), b.data(), y_ref.data());
  ref::conv2d(a, ax.data(), aw.data(), ab.data(), y_abs.data());
  expect_conv_close(y, y_ref, y_abs, d.c * d.kh * d.kw + 1, "forward");

  Buffer dx(d.dtype, nx), dx_ref(d.dtype, nx), dx_abs(DType::f32, nx);
  conv2d_backward_data(d, dy.data(), w.data(), dx.data());
  ref::conv2d_backward_data(d, dy.data(), w.data(), dx_ref.data());
  ref::conv2d_backward_data(a, ady.data(), aw.data(), dx_abs.data());
  expect_conv_close(dx, dx_ref, dx_abs, d.o * d.kh * d.kw, "backward data");

  Buffer dw(d.dtype, nw), dw_ref(d.dtype, nw), dw_abs(DType::f32, nw);
  Buffer db(d.bias_dtype, d.o), db_ref(d.bias_dtype, d.o), db_abs(DType::f32, d.o);
  void* db_ptr = d.has_bias ? db.data() : nullptr;
  conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), db_ptr);
  ref::conv2d_backward_weights(d, x.data(), dy.data(), dw_ref.data(),
                               d.has_bias ? db_ref.data() : nullptr);
  ref::conv2d_backward_weights(a, ax.data(), ady.data(), dw_abs.data(), db_abs.data());
  expect_conv_close(dw, dw_ref, dw_abs, d.n * ho * wo, "backward weights");
  if (d.has_bias) expect_conv_close(db, db_ref, db_abs, d.n * ho * wo, "backward bias");
}

// Restores the process-wide conv policies after a test changes them.
struct ConvPolicy {
  ConvPolicy(ConvBf16Route r, ConvLayout l)
      : route(set_conv_bf16_route(r)), layout(set_conv_layout(l)) {}
  ~ConvPolicy() {
    set_conv_bf16_route(route);
    set_conv_layout(layout);
  }
  ConvBf16Route route;
  ConvLayout layout;
};

TEST(ConvKernel, F32MatchesReferenceInBothLayouts) {
  for (ConvLayout layout : {ConvLayout::plain, ConvLayout::blocked}) {
    ConvPolicy policy(ConvBf16Route::automatic, layout);
    std::uint32_t seed = 10;
    for (const Shape4& s : kShapes) {
      check_all_passes(make_desc(s, DType::f32, true, DType::f32), seed += 10);
      check_all_passes(make_desc(s, DType::f32, false, DType::f32), seed += 10);
    }
  }
}

TEST(ConvKernel, Bf16MatchesReferenceOnBothRoutes) {
  // native runs oneDNN's bf16 kernels (emulated on CPUs without avx512_bf16); widen runs f32.
  for (ConvBf16Route route : {ConvBf16Route::native, ConvBf16Route::widen}) {
    ConvPolicy policy(route, ConvLayout::automatic);
    std::uint32_t seed = 500;
    for (const Shape4& s : kShapes) {
      check_all_passes(make_desc(s, DType::bf16, true, DType::bf16), seed += 10);
      check_all_passes(make_desc(s, DType::bf16, true, DType::f32), seed += 10);
    }
  }
}

TEST(ConvKernel, F16MatchesReference) {
  std::uint32_t seed = 900;
  for (const Shape4& s : kShapes) {
    check_all_passes(make_desc(s, DType::f16, true, DType::f16), seed += 10);
    check_all_passes(make_desc(s, DType::f16, true, DType::f32), seed += 10);
    check_all_passes(make_desc(s, DType::f16, false, DType::f16), seed += 10);
  }
}

TEST(ConvKernel, F16OutputOverflowsToInfAfterF32Accumulation) {
  // 64 products of 100 * 20 = 128000 > f16 max: the f32 sum is exact, its rounding gives Inf;
  // with half the channels negated the sum is 0, proving the accumulation is not in f16.
  Conv2dDesc d = make_desc({1, 64, 1, 1, 2, 1, 1, 1, 0}, DType::f16, false, DType::f16);
  Buffer x(DType::f16, 64), w(DType::f16, 128), y(DType::f16, 2);
  for (int c = 0; c < 64; ++c) {
    x.set(c, 100.0f);
    w.set(c, 20.0f);
    w.set(64 + c, c % 2 == 0 ? 2000.0f : -2000.0f);
  }
  conv2d(d, x.data(), w.data(), nullptr, y.data());
  EXPECT_TRUE(std::isinf(y.get(0)) && y.get(0) > 0);
  EXPECT_EQ(y.get(1), 0.0f);
}

TEST(ConvKernel, EmptyExtentsAndCacheReuse) {
  Conv2dDesc d = make_desc({0, 3, 5, 5, 4, 3, 3, 1, 1}, DType::f32, true, DType::f32);
  Buffer b(DType::f32, 4), dw(DType::f32, 4 * 3 * 9), db(DType::f32, 4);
  for (int i = 0; i < 4; ++i) b.set(i, 1.0f);
  conv2d_backward_weights(d, nullptr, nullptr, dw.data(), db.data());  // N = 0: zero gradients
  for (std::int64_t i = 0; i < dw.size(); ++i) ASSERT_EQ(dw.get(i), 0.0f);
  EXPECT_EQ(db.get(0), 0.0f);
  // C = 0: the output is the bias.
  d = make_desc({1, 0, 2, 2, 4, 1, 1, 1, 0}, DType::f32, true, DType::f32);
  Buffer y(DType::f32, 16);
  conv2d(d, nullptr, nullptr, b.data(), y.data());
  EXPECT_EQ(y.get(15), 1.0f);

  conv_cache_clear();
  d = make_desc(kShapes[0], DType::f32, false, DType::f32);
  const Buffer x = random_buffer(DType::f32, 2 * 3 * 49, -1, 1, 1);
  const Buffer w = random_buffer(DType::f32, 4 * 3 * 9, -1, 1, 2);
  Buffer y1(DType::f32, 2 * 4 * 49), y2(DType::f32, 2 * 4 * 49);
  conv2d(d, x.data(), w.data(), nullptr, y1.data());
  const std::size_t entries = conv_cache_size();
  EXPECT_GE(entries, 1u);
  conv2d(d, x.data(), w.data(), nullptr, y2.data());
  EXPECT_EQ(conv_cache_size(), entries);
  ktest::expect_bitwise(y2, y1, "cached primitive gives the same result");
}

TEST(ConvKernel, RejectsBadDescriptions) {
  Conv2dDesc d = make_desc(kShapes[0], DType::f32, false, DType::f32);
  Buffer buf(DType::f32, 4096);
  auto run = [&](Conv2dDesc bad) { conv2d(bad, buf.data(), buf.data(), buf.data(), buf.data()); };
  Conv2dDesc bad = d;
  bad.stride = 0;
  EXPECT_THROW(run(bad), ValueError);
  bad = d;
  bad.padding = -1;
  EXPECT_THROW(run(bad), ValueError);
  bad = d;
  bad.kh = 10;  // 7 + 2 < 10
  EXPECT_THROW(run(bad), ShapeError);
  bad = d;
  bad.n = -1;
  EXPECT_THROW(run(bad), ShapeError);
  bad = d;
  bad.dtype = DType::bf16;
  bad.has_bias = true;
  bad.bias_dtype = DType::f16;
  EXPECT_THROW(run(bad), DTypeError);
}

// ---- pooling ----

Pool2dDesc pool(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                std::int64_t s, std::int64_t p, DType t) {
  Pool2dDesc d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.kernel = k, d.stride = s, d.padding = p, d.dtype = t;
  return d;
}

Buffer from(DType t, const std::vector<float>& v) {
  Buffer b(t, static_cast<std::int64_t>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) b.set(static_cast<std::int64_t>(i), v[i]);
  return b;
}

TEST(ConvPool, MaxPoolHandComputedWithTiesAndPadding) {
  for (DType t : ktest::kAllDTypes) {
    // 4x4 plane, 2x2 windows: the top-left window ties (3, 3): the first one wins.
    const Buffer x = from(t, {3, 1, 0, 2,  //
                              3, 2, 5, 4,  //
                              -1, -2, -3, -4,  //
                              -5, -6, -7, -0.5f});
    Buffer y(t, 4);
    std::vector<std::int32_t> am(4);
    max_pool2d(pool(1, 1, 4, 4, 2, 2, 0, t), x.data(), y.data(), am.data());
    EXPECT_EQ(y.get(0), 3);
    EXPECT_EQ(y.get(1), 5);
    EXPECT_EQ(y.get(2), -1);
    EXPECT_EQ(y.get(3), -0.5f);
    EXPECT_EQ(am, (std::vector<std::int32_t>{0, 6, 8, 15}));
    // Backward routes each gradient to its argmax; overlapping windows (k3 s1 p1) accumulate.
    const Buffer dy = from(t, {1, 2, 3, 4});
    Buffer dx(t, 16);
    max_pool2d_backward(pool(1, 1, 4, 4, 2, 2, 0, t), dy.data(), am.data(), dx.data());
    EXPECT_EQ(dx.get(0), 1);
    EXPECT_EQ(dx.get(4), 0);  // the second 3 of the tie gets nothing
    EXPECT_EQ(dx.get(6), 2);
    EXPECT_EQ(dx.get(15), 4);
    // All-negative input with padding: padding is not a zero that could win.
    Buffer y2(t, 16);
    std::vector<std::int32_t> am2(16);
    const Pool2dDesc d2 = pool(1, 1, 4, 4, 3, 1, 1, t);
    max_pool2d(d2, x.data(), y2.data(), am2.data());
    EXPECT_EQ(y2.get(15), -0.5f);
    EXPECT_EQ(y2.get(14), -0.5f);
    EXPECT_EQ(y2.get(0), 3);
    Buffer ones = from(t, std::vector<float>(16, 1.0f)), dx2(t, 16);
    max_pool2d_backward(d2, ones.data(), am2.data(), dx2.data());
    EXPECT_EQ(dx2.get(6), 9);  // 5 at (1, 2) wins all 9 windows that contain it
  }
}

TEST(ConvPool, MaxPoolPropagatesNaN) {
  for (DType t : ktest::kAllDTypes) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const Buffer x = from(t, {1, nan, 9, 2,  //
                              8, 2, 3, nan,  //
                              1, 2, 3, 4,  //
                              nan, 1, 2, 3});
    Buffer y(t, 4);
    std::vector<std::int32_t> am(4);
    max_pool2d(pool(1, 1, 4, 4, 2, 2, 0, t), x.data(), y.data(), am.data());
    EXPECT_TRUE(std::isnan(y.get(0)));
    EXPECT_TRUE(std::isnan(y.get(1)));  // NaN after the larger 9 still wins
    EXPECT_TRUE(std::isnan(y.get(2)));
    EXPECT_EQ(y.get(3), 4);
    EXPECT_EQ(am, (std::vector<std::int32_t>{1, 7, 12, 11}));
    // A NaN in the first position of the window.
    Buffer y2(t, 1);
    std::vector<std::int32_t> am2(1);
    max_pool2d(pool(1, 1, 4, 4, 4, 4, 0, t), x.data(), y2.data(), am2.data());
    EXPECT_TRUE(std::isnan(y2.get(0)));
    EXPECT_EQ(am2[0], 1);
  }
}

// The direct path of disjoint windows must keep the reference's bits for special gradients:
// -0 becomes +0 (the reference adds it to a +0 sum) and NaN stays NaN.
TEST(ConvPool, DisjointMaxPoolBackwardKeepsReferenceBitsForSpecialValues) {
  for (DType t : ktest::kAllDTypes) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const Pool2dDesc d = pool(1, 1, 4, 4, 2, 2, 0, t);
    const Buffer x = from(t, {3, 1, 0, 2, 3, 2, 5, 4, -1, -2, -3, -4, -5, -6, -7, -0.5f});
    const Buffer dy = from(t, {-0.0f, nan, 1e-3f, -2});
    std::vector<std::int32_t> am(4);
    Buffer y(t, 4), dx(t, 16), dx_ref(t, 16);
    max_pool2d(d, x.data(), y.data(), am.data());
    max_pool2d_backward(d, dy.data(), am.data(), dx.data());
    ref::max_pool2d_backward(d, dy.data(), am.data(), dx_ref.data());
    ktest::expect_bitwise(dx, dx_ref, "disjoint max_pool2d_backward");
    EXPECT_FALSE(std::signbit(dx.get(0)));  // -0 routed as +0
    EXPECT_TRUE(std::isnan(dx.get(6)));
  }
}

TEST(ConvPool, AvgPoolExcludesPaddingFromTheCount) {
  for (DType t : ktest::kAllDTypes) {
    const Buffer x = from(t, {1, 2, 3,  //
                              4, 5, 6,  //
                              7, 8, 9});
    Buffer y(t, 9);
    const Pool2dDesc d = pool(1, 1, 3, 3, 3, 1, 1, t);
    avg_pool2d(d, x.data(), y.data());
    EXPECT_EQ(y.get(0), 3.0f);  // (1 + 2 + 4 + 5) / 4, not / 9
    EXPECT_EQ(y.get(4), 5.0f);
    EXPECT_EQ(y.get(1), 3.5f);  // (1+2+3+4+5+6) / 6
    const Buffer dy = from(t, std::vector<float>(9, 1.0f));
    Buffer dx(t, 9);
    avg_pool2d_backward(d, dy.data(), dx.data());
    // Windows covering (0, 0) are centred at (0,0), (0,1), (1,0), (1,1) with 4, 6, 6, 9 real
    // elements: each passes on 1/count of its gradient.
    EXPECT_NEAR(dx.get(0), 0.25 + 1.0 / 6 + 1.0 / 6 + 1.0 / 9, 2 * ktest::eps(t));
  }
}

TEST(ConvPool, ParallelKernelsMatchReferenceBitwise) {
  // The dispatcher's row loops must give the reference's bits (same visiting and summation
// order), with planes split across threads (every case has > 32K elements), including
// overlapping windows (stride < kernel) where the order of the backward sums matters.
  for (DType t : ktest::kAllDTypes) {
    for (const Pool2dDesc& d : {pool(2, 32, 28, 28, 2, 2, 0, t), pool(2, 33, 15, 13, 3, 2, 1, t),
                                pool(2, 17, 20, 19, 3, 1, 1, t), pool(1, 64, 9, 11, 4, 3, 2, t),
                                // disjoint windows (the direct path): gaps, truncated edges
                                pool(2, 32, 27, 29, 2, 3, 0, t), pool(2, 40, 31, 30, 3, 3, 0, t),
                                // 2x2 stride 2 (AVX-512 rows): full 16-lane chunks + tails, odd w
                                pool(1, 40, 10, 70, 2, 2, 0, t), pool(2, 20, 9, 33, 2, 2, 0, t)}) {
      const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.out_h() * d.out_w();
      const Buffer x = random_buffer(t, nx, -3, 3, 7), dy = random_buffer(t, ny, -1, 1, 8);
      Buffer y(t, ny), y_ref(t, ny), dx(t, nx), dx_ref(t, nx);
      std::vector<std::int32_t> am(static_cast<std::size_t>(ny)), am_ref(am.size());
      max_pool2d(d, x.data(), y.data(), am.data());
      ref::max_pool2d(d, x.data(), y_ref.data(), am_ref.data());
      ktest::expect_bitwise(y, y_ref, "max_pool2d");
      EXPECT_EQ(am, am_ref);
      max_pool2d_backward(d, dy.data(), am.data(), dx.data());
      ref::max_pool2d_backward(d, dy.data(), am_ref.data(), dx_ref.data());
      ktest::expect_bitwise(dx, dx_ref, "max_pool2d_backward");
      avg_pool2d(d, x.data(), y.data());
      ref::avg_pool2d(d, x.data(), y_ref.data());
      ktest::expect_bitwise(y, y_ref, "avg_pool2d");
      avg_pool2d_backward(d, dy.data(), dx.data());
      ref::avg_pool2d_backward(d, dy.data(), dx_ref.data());
      ktest::expect_bitwise(dx, dx_ref, "avg_pool2d_backward");
      Buffer g(t, d.n * d.c), g_ref(t, d.n * d.c);
      global_avg_pool2d(x.data(), t, d.n * d.c, d.h * d.w, g.data());
      ref::global_avg_pool2d(x.data(), t, d.n * d.c, d.h * d.w, g_ref.data());
      ktest::expect_bitwise(g, g_ref, "global_avg_pool2d");
      // And the mean itself, against a double sum.
      double s = 0;
      for (std::int64_t i = 0; i < d.h * d.w; ++i) s += x.get(i);
      const double mean = s / static_cast<double>(d.h * d.w);
      // f32 summation error (<= 1e-4 here) plus one rounding to t.
      EXPECT_NEAR(g.get(0), mean, 1e-4 + 2 * ktest::eps(t) * std::fabs(mean));
    }
  }
}

TEST(ConvPool, RejectsBadArguments) {
  Buffer buf(DType::f32, 1024);
  std::int32_t am[256];
  auto run = [&](const Pool2dDesc& d) { max_pool2d(d, buf.data(), buf.data(), am); };
  EXPECT_THROW(run(pool(1, 1, 4, 4, 0, 1, 0, DType::f32)), ValueError);
  EXPECT_THROW(run(pool(1, 1, 4, 4, 2, 0, 0, DType::f32)), ValueError);
  EXPECT_THROW(run(pool(1, 1, 4, 4, 2, 2, -1, DType::f32)), ValueError);
  EXPECT_THROW(run(pool(1, 1, 4, 4, 2, 2, 2, DType::f32)), ValueError);  // padding > kernel / 2
  EXPECT_THROW(run(pool(1, 1, 4, 4, 5, 1, 0, DType::f32)), ShapeError);
  EXPECT_THROW(run(pool(1, -1, 4, 4, 2, 2, 0, DType::f32)), ShapeError);
}

}  // namespace
}  // namespace mixprec::kernels
