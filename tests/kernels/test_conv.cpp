// kernels::conv2d* (oneDNN and the direct few-channel kernel, every route and layout, NCHW and
// channels-last) against the reference loops. The pooling kernels: test_pool.cpp.
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
using ktest::to_channels_last;

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

}  // namespace
}  // namespace mixprec::kernels