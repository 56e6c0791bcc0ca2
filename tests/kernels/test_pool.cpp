// The pooling kernels (max with argmax, average, global average; NCHW and channels-last) against
// hand-computed values and the reference loops, on every ISA of this CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "mixprec/core/cpu_features.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;
using ktest::IsaCap;
using ktest::random_buffer;
using ktest::to_channels_last;

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