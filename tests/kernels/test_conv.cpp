// kernels::conv2d* (oneDNN, every route and layout) against the reference loops, and the
// pooling kernels against hand-computed values and the reference.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "mixprec/core/cpu_features.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;
using ktest::IsaCap;
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

// Restores the process-wide conv policies after a test changes them. The oneDNN tests turn the
// direct few-channel kernel off, so the shapes it would take still test oneDNN's routes.
struct ConvPolicy {
  ConvPolicy(ConvBf16Route r, ConvLayout l, bool use_direct = false)
      : route(set_conv_bf16_route(r)), layout(set_conv_layout(l)), direct(set_conv_direct(use_direct)) {}
  ~ConvPolicy() {
    set_conv_bf16_route(route);
    set_conv_layout(layout);
    set_conv_direct(direct);
  }
  ConvBf16Route route;
  ConvLayout layout;
  bool direct;
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
  ConvPolicy policy(ConvBf16Route::automatic, ConvLayout::automatic);
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

  ConvPolicy policy(ConvBf16Route::automatic, ConvLayout::automatic);  // oneDNN, not direct
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

// ---- the direct few-channel kernel (cpu/conv_direct.h) ----

// Stride-1 shapes with 1 to 4 input channels: partial output-channel blocks (5, 13), rows
// longer than a vector and than kRowSlack (70), a rectangular and a 5x5 kernel, padding 0 to
// 2, a one-row output.
const Shape4 kDirectShapes[] = {
    {3, 1, 12, 12, 8, 3, 3, 1, 1},  {2, 3, 7, 9, 5, 3, 3, 1, 1},  {2, 2, 5, 5, 13, 5, 5, 1, 2},
    {1, 3, 8, 6, 4, 3, 2, 1, 1},    {2, 4, 6, 70, 3, 3, 3, 1, 0}, {2, 1, 3, 20, 9, 3, 1, 1, 0},
    {17, 1, 9, 9, 16, 3, 3, 1, 1},
};

// Runs `fn` with the verbose log captured; returns the log.
template <class Fn>
std::string verbose_log_of(Fn&& fn) {
  set_verbose(true);
  testing::internal::CaptureStderr();
  fn();
  std::string log = testing::internal::GetCapturedStderr();
  set_verbose(false);
  return log;
}

TEST(ConvKernel, DirectKernelMatchesReferenceOnEveryIsaAndDtype) {
  ConvPolicy policy(ConvBf16Route::automatic, ConvLayout::automatic, /*direct=*/true);
  for (Isa isa : ktest::isas_to_test()) {
    IsaCap cap(isa);
    SCOPED_TRACE(name(isa));
    std::uint32_t seed = 1300;
    for (const Shape4& s : kDirectShapes) {
      check_all_passes(make_desc(s, DType::f32, true, DType::f32), seed += 10);
      check_all_passes(make_desc(s, DType::bf16, true, DType::bf16), seed += 10);
      check_all_passes(make_desc(s, DType::bf16, false, DType::f32), seed += 10);
      check_all_passes(make_desc(s, DType::f16, true, DType::f32), seed += 10);
    }
  }
}

TEST(ConvKernel, DirectKernelRunsOnlyWhereItIsCoveredAndSaysSo) {
  ConvPolicy policy(ConvBf16Route::automatic, ConvLayout::automatic, /*direct=*/true);
  const auto logs = [](const Shape4& s) {
    const Conv2dDesc d = make_desc(s, DType::f32, false, DType::f32);
    const Buffer x = random_buffer(DType::f32, d.n * d.c * d.h * d.w, -1, 1, 1);
    const Buffer w = random_buffer(DType::f32, d.o * d.c * d.kh * d.kw, -1, 1, 2);
    const Buffer dy = random_buffer(DType::f32, d.n * d.o * d.out_h() * d.out_w(), -1, 1, 3);
    Buffer y(DType::f32, dy.size()), dw(DType::f32, w.size()), dx(DType::f32, x.size());
    return verbose_log_of([&] {
      conv2d(d, x.data(), w.data(), nullptr, y.data());
      conv2d_backward_data(d, dy.data(), w.data(), dx.data());
      conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), nullptr);
    });
  };
  const std::string covered = logs({2, 3, 7, 7, 4, 3, 3, 1, 1});
  EXPECT_NE(covered.find("conv2d f32: ran direct"), std::string::npos) << covered;
  EXPECT_NE(covered.find("conv2d_backward_weights f32: ran direct"), std::string::npos) << covered;
  EXPECT_EQ(covered.find("conv2d_backward_data f32: ran direct"), std::string::npos) << covered;
  for (const Shape4& s : {Shape4{2, 5, 7, 7, 4, 3, 3, 1, 1}, Shape4{2, 3, 9, 9, 4, 3, 3, 2, 1}}) {
    const std::string other = logs(s);  // 5 channels; stride 2
    EXPECT_EQ(other.find("direct"), std::string::npos) << other;
    EXPECT_NE(other.find("onednn"), std::string::npos) << other;
  }
  set_conv_direct(false);
  const std::string off = logs({2, 3, 7, 7, 4, 3, 3, 1, 1});
  EXPECT_EQ(off.find("direct"), std::string::npos) << off;
}

TEST(ConvKernel, DirectKernelIsBitIdenticalAcrossThreadCounts) {
  ConvPolicy policy(ConvBf16Route::automatic, ConvLayout::automatic, /*direct=*/true);
  // Enough work for the threads: 40 samples x 20 channels x 28 x 28 outputs x 9 taps.
  const Conv2dDesc d = make_desc({40, 1, 28, 28, 20, 3, 3, 1, 1}, DType::bf16, true, DType::f32);
  const Buffer x = random_buffer(d.dtype, d.n * d.h * d.w, -1, 1, 5);
  const Buffer w = random_buffer(d.dtype, d.o * 9, -1, 1, 6);
  const Buffer b = random_buffer(DType::f32, d.o, -1, 1, 7);
  const Buffer dy = random_buffer(d.dtype, d.n * d.o * 28 * 28, -1, 1, 8);
  const int saved = omp_get_max_threads();
  std::vector<Buffer> ys, dws, dbs;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Buffer y(d.dtype, dy.size()), dw(d.dtype, w.size()), db(DType::f32, d.o);
    conv2d(d, x.data(), w.data(), b.data(), y.data());
    conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), db.data());
    ys.push_back(std::move(y)), dws.push_back(std::move(dw)), dbs.push_back(std::move(db));
  }
  omp_set_num_threads(saved);
  for (std::size_t k = 1; k < ys.size(); ++k) {
    ktest::expect_bitwise(ys[k], ys[0], "forward, threads " + std::to_string(k + 1));
    ktest::expect_bitwise(dws[k], dws[0], "weight gradient, threads " + std::to_string(k + 1));
    ktest::expect_bitwise(dbs[k], dbs[0], "bias gradient, threads " + std::to_string(k + 1));
  }
}

TEST(ConvKernel, DirectWeightGradientIgnoresInputsNoOutputReads) {
  // No padding, 3 taps along w: output column ox reads input columns ox..ox+2, so the last
  // input column meets only tap kx = 2. Inf there must give Inf/NaN for kx = 2 (as the
  // reference) and leave kx = 0 and 1 finite: the vector lanes past the output row, whose dy is
  // zero, read that column for every tap and must not add 0 * Inf = NaN.
  ConvPolicy policy(ConvBf16Route::automatic, ConvLayout::automatic, /*direct=*/true);
  for (Isa isa : ktest::isas_to_test()) {
    IsaCap cap(isa);
    for (DType t : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(name(isa)) + " " + name(t));
      const Conv2dDesc d = make_desc({2, 1, 2, 21, 3, 1, 3, 1, 0}, t, false, DType::f32);
      Buffer x = random_buffer(t, 2 * 2 * 21, -1, 1, 9);
      for (std::int64_t r = 0; r < 4; ++r) x.set(r * 21 + 20, std::numeric_limits<float>::infinity());
      const Buffer dy = random_buffer(t, 2 * 3 * 2 * 19, 0.5, 1, 10);  // positive: no Inf - Inf
      Buffer dw(t, 9), dw_ref(t, 9);
      conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), nullptr);
      ref::conv2d_backward_weights(d, x.data(), dy.data(), dw_ref.data(), nullptr);
      for (std::int64_t o = 0; o < 3; ++o) {
        EXPECT_TRUE(std::isfinite(dw.get(o * 3 + 0)) && std::isfinite(dw.get(o * 3 + 1))) << o;
        EXPECT_TRUE(std::isinf(dw.get(o * 3 + 2)) && std::isinf(dw_ref.get(o * 3 + 2))) << o;
      }
    }
  }
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
  for (Isa isa : ktest::isas_to_test())
    for (DType t : ktest::kAllDTypes) {
    IsaCap cap(isa);  // every compiled target
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
  for (Isa isa : ktest::isas_to_test())
    for (DType t : ktest::kAllDTypes) {
    IsaCap cap(isa);  // every compiled target
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
  for (Isa isa : ktest::isas_to_test())
    for (DType t : ktest::kAllDTypes) {
    IsaCap cap(isa);  // every compiled target
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
  for (Isa isa : ktest::isas_to_test())
    for (DType t : ktest::kAllDTypes) {
    IsaCap cap(isa);  // every compiled target
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

// Random values in [-3, 3) with special values planted: NaN, +-Inf, and runs of equal values
// and of -0/+0 (ties the first occurrence must win), at positions that differ per plane.
Buffer pool_input(DType t, std::int64_t n, bool specials) {
  Buffer x = random_buffer(t, n, -3, 3, 7);
  if (!specials) return x;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  for (std::int64_t i = 0; i < n; i += 97) x.set(i, nan);
  for (std::int64_t i = 13; i < n; i += 89) x.set(i, inf);
  for (std::int64_t i = 29; i < n; i += 53) x.set(i, -inf);
  for (std::int64_t i = 5; i + 3 < n; i += 61) {
    x.set(i, 2.5f), x.set(i + 1, 2.5f), x.set(i + 2, 2.5f), x.set(i + 3, 2.5f);
  }
  for (std::int64_t i = 41; i + 1 < n; i += 71) x.set(i, -0.0f), x.set(i + 1, 0.0f);
  return x;
}

// Bit for bit, except that any NaN matches any NaN: when a sum meets two NaNs (say Inf - Inf
// and a NaN input), which one comes out depends on the operand order the compiler picks for a
// commutative add (x86 keeps the first), so the NaN's sign and payload are not part of the spec.
void expect_bitwise_any_nan(const Buffer& got, const Buffer& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got.get(i)) && std::isnan(want.get(i));
    if (!both_nan && got.bits(i) != want.bits(i) && bad++ < 5) {
      ADD_FAILURE() << what << " [" << i << "] got " << got.get(i) << " (0x" << std::hex
                    << got.bits(i) << ") want " << want.get(i) << " (0x" << want.bits(i) << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

// Every pooling kernel of kernels::cpu, capped at each ISA level, against kernels::ref: maxima,
// argmax and average pooling bit for bit (same visiting and summation order), global average
// pooling within f32 summation error (it sums a plane across lanes).
void check_pool_against_reference(const Pool2dDesc& d, bool specials, Isa isa) {
  const DType t = d.dtype;
  SCOPED_TRACE(std::string(name(t)) + " " + name(isa) + " [" + std::to_string(d.n) + "," +
               std::to_string(d.c) + "," + std::to_string(d.h) + "," + std::to_string(d.w) +
               "] k" + std::to_string(d.kernel) + " s" + std::to_string(d.stride) + " p" +
               std::to_string(d.padding) + (specials ? " specials" : ""));
  const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.out_h() * d.out_w();
  const Buffer x = pool_input(t, nx, specials), dy = pool_input(t, ny, specials);
  Buffer y(t, ny), y_ref(t, ny), dx(t, nx), dx_ref(t, nx), y_noarg(t, ny);
  std::vector<std::int32_t> am(static_cast<std::size_t>(ny)), am_ref(am.size());
  const std::int64_t planes = d.n * d.c, hw = d.h * d.w;
  Buffer g(t, planes), g_ref(t, planes), gdx(t, nx), gdx_ref(t, nx);
  {
    IsaCap cap(isa);
    cpu::max_pool2d(d, x.data(), y.data(), am.data());
    cpu::max_pool2d(d, x.data(), y_noarg.data(), nullptr);
  }
  ref::max_pool2d(d, x.data(), y_ref.data(), am_ref.data());
  ktest::expect_bitwise(y, y_ref, "max_pool2d");
  ktest::expect_bitwise(y_noarg, y_ref, "max_pool2d without argmax");
  EXPECT_EQ(am, am_ref) << "argmax";
  {
    IsaCap cap(isa);  // backward from the reference's argmax (computed above)
    cpu::max_pool2d_backward(d, dy.data(), am_ref.data(), dx.data());
  }
  ref::max_pool2d_backward(d, dy.data(), am_ref.data(), dx_ref.data());
  ktest::expect_bitwise(dx, dx_ref, "max_pool2d_backward");
  {
    IsaCap cap(isa);
    cpu::avg_pool2d(d, x.data(), y.data());
    cpu::avg_pool2d_backward(d, dy.data(), dx.data());
    cpu::global_avg_pool2d(x.data(), t, planes, hw, g.data());
    cpu::global_avg_pool2d_backward(g.data(), t, planes, hw, gdx.data());
  }
  ref::avg_pool2d(d, x.data(), y_ref.data());
  ref::avg_pool2d_backward(d, dy.data(), dx_ref.data());
  ref::global_avg_pool2d(x.data(), t, planes, hw, g_ref.data());
  ref::global_avg_pool2d_backward(g.data(), t, planes, hw, gdx_ref.data());
  expect_bitwise_any_nan(y, y_ref, "avg_pool2d");
  expect_bitwise_any_nan(dx, dx_ref, "avg_pool2d_backward");
  // Two f32 sums of the same hw values in different orders differ by at most ~hw * 2^-24 of
  // sum |x| (|x| < 3 here, so the mean's error is below hw * 2^-24 * 3); then one rounding to t.
  const double sum_tol = static_cast<double>(hw) * 3.0 * std::ldexp(1.0, -24);
  ktest::expect_close(g, g_ref, [&](std::int64_t i) {
    return sum_tol + 2 * ktest::eps(t) * std::fabs(g_ref.get(i)); }, "global_avg_pool2d");
  ktest::expect_bitwise(gdx, gdx_ref, "global_avg_pool2d_backward");
}

const std::vector<Pool2dDesc> pool_cases(DType t) {
  return {// 2x2 stride 2 (the direct path): full vectors, tails, odd w and h, w < 2 lanes
          pool(2, 32, 28, 28, 2, 2, 0, t), pool(1, 40, 10, 70, 2, 2, 0, t),
          pool(2, 20, 9, 33, 2, 2, 0, t), pool(1, 3, 5, 5, 2, 2, 0, t), pool(1, 2, 2, 3, 2, 2, 0, t),
          // overlapping and padded windows
          pool(2, 33, 15, 13, 3, 2, 1, t), pool(2, 17, 20, 19, 3, 1, 1, t),
          pool(1, 64, 9, 11, 4, 3, 2, t), pool(1, 3, 7, 40, 3, 1, 1, t), pool(1, 2, 6, 6, 6, 1, 3, t),
          // disjoint windows with gaps or other sizes, truncated edges
          pool(2, 32, 27, 29, 2, 3, 0, t), pool(2, 40, 31, 30, 3, 3, 0, t),
          pool(1, 2, 1, 1, 1, 1, 0, t), pool(1, 3, 4, 37, 1, 2, 0, t)};
}

TEST(ConvPool, KernelsMatchReferenceOnEveryIsa) {
  for (Isa isa : ktest::isas_to_test()) {
    for (DType t : ktest::kAllDTypes) {
      for (const Pool2dDesc& d : pool_cases(t)) {
        check_pool_against_reference(d, false, isa);
        check_pool_against_reference(d, true, isa);
      }
    }
  }
}

// A [n, c, h, w] NCHW buffer's elements in channels-last order (bits copied, NaN payloads kept).
Buffer to_channels_last(const Buffer& b, std::int64_t n, std::int64_t c, std::int64_t h,
                        std::int64_t w) {
  Buffer out(b.dtype(), b.size());
  const std::size_t es = size_of(b.dtype());
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < h * w; ++p) {
        std::memcpy(static_cast<char*>(out.data()) + ((s * h * w + p) * c + ch) * es,
                    static_cast<const char*>(b.data()) + ((s * c + ch) * h * w + p) * es, es);
      }
  return out;
}

std::vector<std::int32_t> to_channels_last(const std::vector<std::int32_t>& v, std::int64_t n,
                                           std::int64_t c, std::int64_t hw) {
  std::vector<std::int32_t> out(v.size());
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < hw; ++p) {
        out[static_cast<std::size_t>((s * hw + p) * c + ch)] = v[static_cast<std::size_t>((s * c + ch) * hw + p)];
      }
  return out;
}

// Channels-last pooling: the reference in NHWC is the NCHW reference transposed (maxima, argmax,
// means and both gradients bit for bit: the same windows in the same order), and the cpu
// backend's channel-row loops match it bit for bit.
// Channels-last pooling: the reference in NHWC is the NCHW reference transposed, and the cpu
// kernels (Highway lanes across channels for max pooling) give its bits on every ISA, through
// every channel-block width (the cases' 2 to 64 channels leave tails of every size).
TEST(ConvPool, ChannelsLastIsTheTransposedNchwResult) {
  for (Isa isa : ktest::isas_to_test()) {
  for (DType t : ktest::kAllDTypes) {
    for (const Pool2dDesc& nchw : pool_cases(t)) {
      for (const bool specials : {false, true}) {
        Pool2dDesc d = nchw;
        d.channels_last = true;
        const std::int64_t ho = d.out_h(), wo = d.out_w();
        const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * ho * wo;
        SCOPED_TRACE(std::string(name(t)) + " " + name(isa) + " [" + std::to_string(d.n) + "," + std::to_string(d.c) +
                     "," + std::to_string(d.h) + "," + std::to_string(d.w) + "] k" +
                     std::to_string(d.kernel) + " s" + std::to_string(d.stride) + " p" +
                     std::to_string(d.padding) + (specials ? " specials" : ""));
        const Buffer x = pool_input(t, nx, specials), dy = pool_input(t, ny, specials);
        const Buffer xl = to_channels_last(x, d.n, d.c, d.h, d.w);
        const Buffer dyl = to_channels_last(dy, d.n, d.c, ho, wo);
        Buffer y(t, ny), yl(t, ny), yc(t, ny), dx(t, nx), dxl(t, nx), dxc(t, nx);
        std::vector<std::int32_t> am(static_cast<std::size_t>(ny)), aml(am.size()), amc(am.size());

        ref::max_pool2d(nchw, x.data(), y.data(), am.data());
        ref::max_pool2d(d, xl.data(), yl.data(), aml.data());
        Buffer yc_noarg(t, ny);
        {
          IsaCap cap(isa);
          cpu::max_pool2d(d, xl.data(), yc.data(), amc.data());
          cpu::max_pool2d(d, xl.data(), yc_noarg.data(), nullptr);
        }
        ktest::expect_bitwise(yl, to_channels_last(y, d.n, d.c, ho, wo), "ref max nhwc");
        EXPECT_EQ(aml, to_channels_last(am, d.n, d.c, ho * wo)) << "ref argmax nhwc";
        ktest::expect_bitwise(yc, yl, "cpu max nhwc");
        ktest::expect_bitwise(yc_noarg, yl, "cpu max nhwc without argmax");
        EXPECT_EQ(amc, aml) << "cpu argmax nhwc";

        ref::max_pool2d_backward(nchw, dy.data(), am.data(), dx.data());
        ref::max_pool2d_backward(d, dyl.data(), aml.data(), dxl.data());
        // Every element must be written, the zeros included: start from NaN bits.
        std::memset(dxc.data(), 0xff, static_cast<std::size_t>(nx) * size_of(t));
        {
          IsaCap cap(isa);
          cpu::max_pool2d_backward(d, dyl.data(), aml.data(), dxc.data());
        }
        ktest::expect_bitwise(dxl, to_channels_last(dx, d.n, d.c, d.h, d.w), "ref max bwd nhwc");
        // Disjoint windows: bit for bit. Overlapping ones may add two NaNs into one element,
        // where which NaN survives is the compiler's choice of operand order: NaN either way.
        if (d.padding == 0 && d.stride >= d.kernel) {
          ktest::expect_bitwise(dxc, dxl, "cpu max bwd nhwc");
        } else {
          expect_bitwise_any_nan(dxc, dxl, "cpu max bwd nhwc");
        }

        ref::avg_pool2d(nchw, x.data(), y.data());
        ref::avg_pool2d(d, xl.data(), yl.data());
        {
          IsaCap cap(isa);
          cpu::avg_pool2d(d, xl.data(), yc.data());
        }
        expect_bitwise_any_nan(yl, to_channels_last(y, d.n, d.c, ho, wo), "ref avg nhwc");
        expect_bitwise_any_nan(yc, yl, "cpu avg nhwc");

        ref::avg_pool2d_backward(nchw, dy.data(), dx.data());
        ref::avg_pool2d_backward(d, dyl.data(), dxl.data());
        {
          IsaCap cap(isa);
          cpu::avg_pool2d_backward(d, dyl.data(), dxc.data());
        }
        expect_bitwise_any_nan(dxl, to_channels_last(dx, d.n, d.c, d.h, d.w), "ref avg bwd nhwc");
        expect_bitwise_any_nan(dxc, dxl, "cpu avg bwd nhwc");
      }
    }
  }
  }
}

// Channels-last convolution: the reference in NHWC is the NCHW reference transposed, bit for
// bit (its sums run in the same order), and oneDNN's nhwc kernels (plain and blocked) are within
// the convolution tolerance of it, on every dtype.
TEST(ConvKernel, ChannelsLastMatchesTheTransposedReference) {
  for (ConvLayout layout : {ConvLayout::automatic, ConvLayout::plain, ConvLayout::blocked}) {
    ConvPolicy policy(ConvBf16Route::automatic, layout, true);
    std::uint32_t seed = 1300;
    for (DType t : ktest::kAllDTypes) {
      for (const Shape4& s : kShapes) {
        Conv2dDesc d = make_desc(s, t, true, DType::f32);
        const Conv2dDesc nchw = d;
        d.channels_last = true;
        const std::int64_t ho = d.out_h(), wo = d.out_w();
        const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.o * ho * wo;
        const std::int64_t nw = d.o * d.c * d.kh * d.kw;
        const Buffer x = random_buffer(t, nx, -1, 1, seed += 10);
        const Buffer w = random_buffer(t, nw, -1, 1, seed += 10);
        const Buffer b = random_buffer(DType::f32, d.o, -1, 1, seed += 10);
        const Buffer dy = random_buffer(t, ny, -1, 1, seed += 10);
        const Buffer xl = to_channels_last(x, d.n, d.c, d.h, d.w);
        const Buffer dyl = to_channels_last(dy, d.n, d.o, ho, wo);
        Buffer y(t, ny), yl(t, ny), yc(t, ny);
        ref::conv2d(nchw, x.data(), w.data(), b.data(), y.data());
        ref::conv2d(d, xl.data(), w.data(), b.data(), yl.data());
        conv2d(d, xl.data(), w.data(), b.data(), yc.data());
        ktest::expect_bitwise(yl, to_channels_last(y, d.n, d.o, ho, wo), "ref forward nhwc");
        ktest::expect_close(yc, yl, [&](std::int64_t i) {
          return 1e-5 * d.c * d.kh * d.kw + 2 * ktest::eps(t) * std::fabs(yl.get(i)); }, "forward nhwc");

        Buffer dx(t, nx), dxl(t, nx), dxc(t, nx);
        ref::conv2d_backward_data(nchw, dy.data(), w.data(), dx.data());
        ref::conv2d_backward_data(d, dyl.data(), w.data(), dxl.data());
        conv2d_backward_data(d, dyl.data(), w.data(), dxc.data());
        ktest::expect_bitwise(dxl, to_channels_last(dx, d.n, d.c, d.h, d.w), "ref backward data nhwc");
        ktest::expect_close(dxc, dxl, [&](std::int64_t i) {
          return 1e-5 * d.o * d.kh * d.kw + 2 * ktest::eps(t) * std::fabs(dxl.get(i)); }, "backward data nhwc");

        Buffer dw(t, nw), dwl(t, nw), dwc(t, nw), db(DType::f32, d.o), dbl(DType::f32, d.o), dbc(DType::f32, d.o);
        ref::conv2d_backward_weights(nchw, x.data(), dy.data(), dw.data(), db.data());
        ref::conv2d_backward_weights(d, xl.data(), dyl.data(), dwl.data(), dbl.data());
        conv2d_backward_weights(d, xl.data(), dyl.data(), dwc.data(), dbc.data());
        ktest::expect_bitwise(dwl, dw, "ref backward weights nhwc");
        ktest::expect_bitwise(dbl, db, "ref backward bias nhwc");
        const double sums = static_cast<double>(d.n * ho * wo);
        ktest::expect_close(dwc, dwl, [&](std::int64_t i) {
          return 1e-5 * sums + 2 * ktest::eps(t) * std::fabs(dwl.get(i)); }, "backward weights nhwc");
        ktest::expect_close(dbc, dbl, [&](std::int64_t i) {
          return 1e-5 * sums + 2 * ktest::eps(DType::f32) * std::fabs(dbl.get(i)); }, "backward bias nhwc");
      }
    }
  }
}

// Channels-last activations stay in nhwc through oneDNN's JIT kernels (weights in its own
// layout): reordering a [128, 32, 14, 14] activation to blocked and back cost more per step
// than the batch norm after it. x86 from AVX2 up has those kernels, in bf16 and f32 alike.
TEST(ConvKernel, ChannelsLastRunsOnNhwcWithoutActivationReorders) {
#if defined(__x86_64__)
  if (!isa_allowed(Isa::avx2)) GTEST_SKIP() << "oneDNN's nhwc JIT kernels need AVX2";
  ConvPolicy policy(ConvBf16Route::automatic, ConvLayout::automatic, true);
  for (DType t : {DType::f32, DType::bf16}) {
    Conv2dDesc d = make_desc({4, 32, 14, 14, 64, 3, 3, 1, 1}, t, false, DType::f32);
    d.channels_last = true;
    const std::int64_t ny = d.n * d.o * d.out_h() * d.out_w(), nx = d.n * d.c * d.h * d.w;
    const Buffer x = random_buffer(t, nx, -1, 1, 5), w = random_buffer(t, d.o * d.c * 9, -1, 1, 6);
    const Buffer dy = random_buffer(t, ny, -1, 1, 7);
    Buffer y(t, ny), dx(t, nx), dw(t, w.size());
    const std::string log = verbose_log_of([&] {
      conv2d(d, x.data(), w.data(), nullptr, y.data());
      conv2d_backward_data(d, dy.data(), w.data(), dx.data());
      conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), nullptr);
    });
    SCOPED_TRACE(name(t));
    for (const char* pass : {"conv2d ", "conv2d_backward_data ", "conv2d_backward_weights "}) {
      const std::size_t at = log.find(pass);
      ASSERT_NE(at, std::string::npos) << log;
      const std::string line = log.substr(at, log.find('\n', at) - at);
      EXPECT_NE(line.find("on nhwc"), std::string::npos) << line;
      EXPECT_EQ(line.find("reorders"), std::string::npos) << line;
    }
  }
#else
  GTEST_SKIP() << "oneDNN's nhwc JIT kernels are measured on x86 only";
#endif
}

TEST(ConvPool, GlobalAvgPoolIsTheMean) {
  for (Isa isa : ktest::isas_to_test()) {
    IsaCap cap(isa);
    for (DType t : ktest::kAllDTypes) {
      for (std::int64_t hw : {1, 7, 33, 784, 5000}) {
        const Buffer x = random_buffer(t, 3 * hw, -3, 3, 9);
        Buffer g(t, 3);
        cpu::global_avg_pool2d(x.data(), t, 3, hw, g.data());
        for (std::int64_t q = 0; q < 3; ++q) {
          double s = 0;
          for (std::int64_t i = 0; i < hw; ++i) s += x.get(q * hw + i);
          const double mean = s / static_cast<double>(hw);
          // f32 summation error plus one rounding to t.
          EXPECT_NEAR(g.get(q), mean, 1e-5 + 2 * ktest::eps(t) * std::fabs(mean))
              << name(t) << " " << name(isa) << " hw " << hw;
        }
      }
    }
  }
}

TEST(ConvPool, AvgPoolRoundsTinyAndHugeValuesLikeTheReference) {
  // f16 subnormals (averages that round to the 2^-24 quantum, ties included) and values near
  // the f16 / bf16 maximum: the vector rounding must give the scalar conversion's bits.
  for (Isa isa : ktest::isas_to_test()) {
    for (DType t : ktest::kAllDTypes) {
      const float scale = t == DType::f16 ? std::ldexp(1.0f, -14) : std::ldexp(1.0f, -126);
      const Pool2dDesc d = pool(1, 3, 9, 21, 3, 1, 1, t);
      const std::int64_t nx = 3 * 9 * 21, ny = 3 * d.out_h() * d.out_w();
      Buffer x = random_buffer(t, nx, -1, 1, 17);
      for (std::int64_t i = 0; i < nx; ++i) x.set(i, x.get(i) * (i % 3 == 0 ? 65504.0f : scale));
      if (t == DType::bf16) {
        for (std::int64_t i = 0; i < nx; i += 3) x.set(i, x.get(i) * 1e33f);
      }
      Buffer y(t, ny), y_ref(t, ny), dx(t, nx), dx_ref(t, nx);
      {
        IsaCap cap(isa);
        cpu::avg_pool2d(d, x.data(), y.data());
        cpu::avg_pool2d_backward(d, x.data(), dx.data());  // x doubles as a gradient of ny <= nx
      }
      ref::avg_pool2d(d, x.data(), y_ref.data());
      ref::avg_pool2d_backward(d, x.data(), dx_ref.data());
      const std::string what = std::string(name(t)) + " " + name(isa);
      ktest::expect_bitwise(y, y_ref, "avg_pool2d " + what);
      ktest::expect_bitwise(dx, dx_ref, "avg_pool2d_backward " + what);
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
