// The fp8 recipe kernels (kernels/fp8_scale.h) against independent oracles: the saturating cast
// at every rounding boundary of both formats against numerics/formats.h's double-precision
// quantiser (with the saturating rule applied to its result), through scales 2^k, from f32 and
// from every bf16 and f16 pattern; amax against a plain max (NaN and Inf propagate); the
// reference and the cpu backend bit for bit (serial and threaded sizes); and the scale update
// by its transitions (push, window, margin, zero and non-finite amax, current scaling), its
// power-of-two scale against a search in double, and its argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend_scope.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/half.h"
#include "mixprec/numerics/formats.h"

namespace mixprec::kernels {
namespace {

using numerics::Format;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

const numerics::FormatInfo& fmt_info(DType fmt) {
  return numerics::format_info(fmt == DType::f8e4m3 ? Format::fp8_e4m3 : Format::fp8_e5m2);
}

/// The independent oracle: round x (a double) to the format without saturation, then apply
/// OCP's saturating rule to the result: an overflow (Inf, or E4M3's NaN from a non-NaN) or an
/// infinite input becomes +-max; NaN stays the canonical NaN with x's sign.
std::uint8_t oracle_bits(double x, DType fmt) {
  const numerics::FormatInfo& f = fmt_info(fmt);
  if (std::isnan(x)) return static_cast<std::uint8_t>(numerics::encode_bits(x, f));
  const double q = numerics::quantize(x, f);
  if (std::isinf(q) || std::isnan(q)) {
    return static_cast<std::uint8_t>(numerics::encode_bits(std::copysign(f.max, x), f));
  }
  return static_cast<std::uint8_t>(numerics::encode_bits(q, f));
}

/// Every finite value of the format, the midpoints between neighbours (the ties), one f32 ulp
/// either side of each, values beyond max up to far beyond, Inf, NaN and the zeros, both signs.
std::vector<float> boundary_values(DType fmt) {
  const numerics::FormatInfo& f = fmt_info(fmt);
  std::vector<double> mags;
  for (std::uint32_t b = 0; b < 0x80; ++b) {
    const double v = numerics::decode_bits(b, f);
    if (std::isfinite(v)) mags.push_back(v);
  }
  std::vector<float> out;
  for (std::size_t i = 0; i < mags.size(); ++i) {
    out.push_back(static_cast<float>(mags[i]));
    // the midpoint to the next value: the last one's is the half-step beyond max (the rounding
    // edge of the non-saturating cast), computed from the step of the top binade
    const double next = i + 1 < mags.size() ? mags[i + 1] : mags[i] + (mags[i] - mags[i - 1]);
    const auto mid = static_cast<float>((mags[i] + next) / 2);  // exact: few significant bits
    out.push_back(mid);
    out.push_back(std::nextafter(mid, 0.0f));
    out.push_back(std::nextafter(mid, kInf));
  }
  for (float big : {500.0f, 61439.0f, 61440.0f, 65536.0f, 1e10f, 3.4e38f, kInf}) out.push_back(big);
  out.push_back(std::ldexp(1.0f, -20));  // half of E5M2's smallest subnormal 2^-16 and below
  out.push_back(std::ldexp(1.0f, -17));
  out.push_back(1e-40f);  // an f32 subnormal
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  out.push_back(kNaN);
  out.push_back(-kNaN);
  return out;
}

std::vector<std::uint8_t> cast_on(const Backend& b, const std::vector<float>& x, DType fmt,
                                  float scale, float* amax) {
  std::vector<std::uint8_t> y(x.size() + 1, 0xAA);
  b.fp8_scaled_cast(x.data(), DType::f32, y.data(), fmt, static_cast<std::int64_t>(x.size()),
                    &scale, amax);
  y.pop_back();
  return y;
}

class Fp8ScaledCast : public ::testing::TestWithParam<DType> {};

TEST_P(Fp8ScaledCast, EveryBoundaryMatchesTheIndependentQuantiser) {
  const DType fmt = GetParam();
  // Scale 2^k: the kernel sees x / 2^k and multiplies it back exactly, so every boundary is
  // met through the scale too (k = 0 is the plain saturating cast).
  for (int k : {0, 6, -5, 20}) {
    const std::vector<float> v = boundary_values(fmt);
    std::vector<float> x(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) x[i] = std::ldexp(v[i], -k);
    const float scale = std::ldexp(1.0f, k);
    for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
      const std::vector<std::uint8_t> y = cast_on(*b, x, fmt, scale, nullptr);
      for (std::size_t i = 0; i < x.size(); ++i) {
        // the oracle sees the f32 product x * 2^k, exactly v unless the shift left f32's range
        const double want_in = static_cast<double>(x[i]) * std::ldexp(1.0, k);
        ASSERT_EQ(y[i], oracle_bits(want_in, fmt))
            << b->name << " " << name(fmt) << " k=" << k << " v=" << v[i];
      }
    }
  }
}

TEST_P(Fp8ScaledCast, SaturatesWhereThePlainCastOverflows) {
  const DType fmt = GetParam();
  const bool e4m3 = fmt == DType::f8e4m3;
  const std::uint8_t max_bits = e4m3 ? 0x7e : 0x7b;
  const std::vector<float> x{e4m3 ? 470.0f : 61440.0f, -1e30f, kInf, -kInf, kNaN, -kNaN, -0.0f};
  const std::vector<std::uint8_t> y = cast_on(cpu_backend(), x, fmt, 1.0f, nullptr);
  EXPECT_EQ(y[0], max_bits);
  EXPECT_EQ(y[1], max_bits | 0x80);
  EXPECT_EQ(y[2], max_bits);  // +-Inf saturate (PTX's .satfinite)
  EXPECT_EQ(y[3], max_bits | 0x80);
  EXPECT_EQ(y[4], e4m3 ? 0x7f : 0x7e);  // NaN stays NaN, with its sign
  EXPECT_EQ(y[5], e4m3 ? 0xff : 0xfe);
  EXPECT_EQ(y[6], 0x80);  // the sign of zero is kept
  // The plain cast stays non-saturating.
  EXPECT_EQ(e4m3 ? f32_to_e4m3_bits(470.0f) : f32_to_e5m2_bits(61440.0f), e4m3 ? 0x7f : 0x7c);
}

TEST_P(Fp8ScaledCast, SixteenBitInputsEveryPattern) {
  const DType fmt = GetParam();
  for (DType t : {DType::bf16, DType::f16}) {
    std::vector<std::uint16_t> x(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) x[i] = static_cast<std::uint16_t>(i);
    const float scale = 0.25f;
    for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
      std::vector<std::uint8_t> y(65536);
      float amax = -1.0f;
      b->fp8_scaled_cast(x.data(), t, y.data(), fmt, 65536, &scale, &amax);
      for (std::uint32_t i = 0; i < 65536; ++i) {
        const float w = t == DType::bf16 ? bf16_bits_to_f32(x[i]) : f16_bits_to_f32(x[i]);
        ASSERT_EQ(y[i], oracle_bits(static_cast<double>(w) * 0.25, fmt))
            << b->name << " " << name(t) << " pattern " << i;
      }
      EXPECT_TRUE(std::isnan(amax)) << "every pattern includes NaNs";
    }
  }
}

TEST_P(Fp8ScaledCast, AmaxIsExactAndPropagatesNonFinite) {
  const DType fmt = GetParam();
  for (std::int64_t n : {0, 1, 33, 70001, 300007}) {  // serial and threaded sizes
    std::mt19937 rng(static_cast<std::uint32_t>(n));
    std::uniform_real_distribution<float> dist(-1e4f, 1e4f);
    std::vector<float> x(static_cast<std::size_t>(n));
    float want = 0.0f;
    for (float& v : x) {
      v = dist(rng);
      want = std::max(want, std::fabs(v));
    }
    for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
      float amax = -1.0f, only = -1.0f;
      const std::vector<std::uint8_t> y = cast_on(*b, x, fmt, 1.0f / 64, &amax);
      b->fp8_scaled_cast(x.data(), DType::f32, nullptr, fmt, n, nullptr, &only);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(amax), std::bit_cast<std::uint32_t>(want))
          << b->name << " n=" << n;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(only), std::bit_cast<std::uint32_t>(want));
      EXPECT_EQ(y, cast_on(ref_backend(), x, fmt, 1.0f / 64, nullptr)) << b->name << " n=" << n;
    }
    if (n < 33) continue;
    // an Inf somewhere: amax is Inf; a NaN too: amax is NaN (whatever the order)
    x[static_cast<std::size_t>(n / 3)] = -kInf;
    for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
      float amax = 0.0f;
      cast_on(*b, x, fmt, 1.0f, &amax);
      EXPECT_EQ(amax, kInf) << b->name;
    }
    x[static_cast<std::size_t>(n - 1)] = kNaN;
    x[static_cast<std::size_t>(n / 5)] = -kInf;
    for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
      float amax = 0.0f;
      cast_on(*b, x, fmt, 1.0f, &amax);
      EXPECT_TRUE(std::isnan(amax)) << b->name;
    }
  }
}

// The cpu backend's cast runs on Highway lanes: on every ISA this CPU has, down to scalar, the
// bytes and the amax are the reference's, for f32 boundary values through scales 2^k, every
// bf16 and f16 pattern, and random values with Inf and NaN at sizes that leave tails.
TEST_P(Fp8ScaledCast, CpuMatchesTheReferenceOnEveryIsa) {
  const DType fmt = GetParam();
  const auto compare = [&](const void* x, DType t, std::int64_t n, float scale, const std::string& what) {
    std::vector<std::uint8_t> want(static_cast<std::size_t>(n) + 1, 0xAA), got(want);
    float want_amax = -1.0f;
    ref_backend().fp8_scaled_cast(x, t, want.data(), fmt, n, &scale, &want_amax);
    for (Isa isa : ktest::isas_to_test()) {
      ktest::IsaCap cap(isa);
      float amax = -1.0f, only = -1.0f;
      std::fill(got.begin(), got.end(), std::uint8_t{0xAA});
      cpu_backend().fp8_scaled_cast(x, t, got.data(), fmt, n, &scale, &amax);
      cpu_backend().fp8_scaled_cast(x, t, nullptr, fmt, n, nullptr, &only);
      ASSERT_EQ(got, want) << what << " " << name(isa);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(amax), std::bit_cast<std::uint32_t>(want_amax))
          << what << " " << name(isa);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(only), std::bit_cast<std::uint32_t>(want_amax))
          << what << " " << name(isa);
    }
  };
  for (int k : {0, 6, -5, 20}) {
    std::vector<float> x = boundary_values(fmt);
    for (float& v : x) v = std::ldexp(v, -k);
    compare(x.data(), DType::f32, static_cast<std::int64_t>(x.size()), std::ldexp(1.0f, k),
            "boundaries k=" + std::to_string(k));
  }
  std::vector<std::uint16_t> patterns(65536 + 7);
  for (std::size_t i = 0; i < patterns.size(); ++i) patterns[i] = static_cast<std::uint16_t>(i * 40503u);
  for (DType t : {DType::bf16, DType::f16}) {
    compare(patterns.data(), t, static_cast<std::int64_t>(patterns.size()), 0.25f, name(t));
  }
  for (std::int64_t n : {1, 15, 33, 70001}) {
    std::mt19937 rng(static_cast<std::uint32_t>(n));
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = dist(rng);
    compare(x.data(), DType::f32, n, 0.5f, "random n=" + std::to_string(n));
    x[static_cast<std::size_t>(n / 2)] = -kInf;
    compare(x.data(), DType::f32, n, 0.5f, "with -Inf n=" + std::to_string(n));
    x[static_cast<std::size_t>(n - 1)] = kNaN;
    compare(x.data(), DType::f32, n, 0.5f, "with NaN n=" + std::to_string(n));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8ScaledCast, ::testing::Values(DType::f8e4m3, DType::f8e5m2),
                         [](const auto& p) { return std::string(name(p.param)); });

TEST(Fp8ScaledCastErrors, RefusesBadArguments) {
  float x = 1.0f, s = 1.0f, a = 0.0f;
  std::uint8_t y = 0;
  for (const Backend* b : {&ref_backend(), &cpu_backend()}) {
    EXPECT_THROW(b->fp8_scaled_cast(&x, DType::f32, &y, DType::bf16, 1, &s, &a), DTypeError);
    EXPECT_THROW(b->fp8_scaled_cast(&y, DType::f8e4m3, &y, DType::f8e4m3, 1, &s, &a), DTypeError);
    EXPECT_THROW(b->fp8_scaled_cast(&x, DType::f32, &y, DType::f8e4m3, -1, &s, &a), ShapeError);
    EXPECT_THROW(b->fp8_scaled_cast(&x, DType::f32, &y, DType::f8e4m3, 1, nullptr, &a), ValueError);
    EXPECT_THROW(b->fp8_scaled_cast(&x, DType::f32, nullptr, DType::f8e4m3, 1, &s, nullptr),
                 ValueError);
  }
}

// ---- scale update ----

/// The oracle of the scale: the largest k with amax * 2^k <= max, found by stepping in double,
/// then 2^(k - margin) clamped to [2^-126, 2^127].
float oracle_scale(double amax, double max, int margin) {
  int k = 0;
  while (amax * std::ldexp(1.0, k) > max) --k;
  while (amax * std::ldexp(1.0, k + 1) <= max) ++k;
  return std::ldexp(1.0f, std::clamp(k - margin, -126, 127));
}

struct Update {
  std::vector<float> history;
  float scale = 1.0f;
  float found_inf = 0.0f;
  /// One update through the entry point, on the backend named (cpu leaves the entry to the
  /// reference: the fallback runs it).
  void step(float amax, DType fmt = DType::f8e4m3, int margin = 0, const char* backend = "ref") {
    const testing::BackendScope scope(backend);
    kernels::fp8_scale_update(history.data(), static_cast<std::int64_t>(history.size()), &amax,
                              &scale, fmt, margin, &found_inf);
  }
};

TEST(Fp8ScaleUpdate, PowerOfTwoScaleMatchesASearchInDouble) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-140.0f, 127.0f);
  for (DType fmt : {DType::f8e4m3, DType::f8e5m2}) {
    const double max = fmt_info(fmt).max;
    std::vector<float> amaxes{448.0f, 447.99997f, 448.00003f, 57344.0f, 224.0f, 1.0f, 1e-45f,
                              3.4028235e38f, 896.0f, 0.875f};
    for (int i = 0; i < 2000; ++i) amaxes.push_back(std::exp2(exponent(rng)));
    for (float a : amaxes) {
      if (!(a > 0.0f)) continue;
      for (int margin : {0, 1, 3}) {
        Update u{{0.0f}};
        u.step(a, fmt, margin);
        ASSERT_EQ(u.scale, oracle_scale(a, max, margin)) << name(fmt) << " amax=" << a;
        // the largest value lands within range and the scale is the tightest power of two
        if (margin == 0 && u.scale < std::ldexp(1.0f, 127) && u.scale > std::ldexp(1.0f, -126)) {
          EXPECT_LE(static_cast<double>(a) * u.scale, max);
          EXPECT_GT(static_cast<double>(a) * u.scale * 2, max);
        }
      }
    }
  }
}

TEST(Fp8ScaleUpdate, TransitionsOfADelayedHistory) {
  Update u{std::vector<float>(3, 0.0f)};
  u.step(0.0f);  // nothing seen yet: the scale is kept
  EXPECT_EQ(u.scale, 1.0f);
  EXPECT_EQ(u.history, (std::vector<float>{0.0f, 0.0f, 0.0f}));
  u.step(7.0f);  // 448 / 7 = 64: scale 2^6
  EXPECT_EQ(u.history, (std::vector<float>{7.0f, 0.0f, 0.0f}));
  EXPECT_EQ(u.scale, 64.0f);
  u.step(100.0f);  // window max 100: 448/100 = 4.48 -> 4
  EXPECT_EQ(u.scale, 4.0f);
  u.step(1.0f);
  EXPECT_EQ(u.history, (std::vector<float>{1.0f, 100.0f, 7.0f}));
  EXPECT_EQ(u.scale, 4.0f);  // 100 still in the window
  u.step(1.0f);
  EXPECT_EQ(u.scale, 4.0f);  // 100 is the oldest now
  u.step(1.0f);
  EXPECT_EQ(u.history, (std::vector<float>{1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(u.scale, 256.0f);  // 100 dropped out: 448/1 -> 2^8
  EXPECT_EQ(u.found_inf, 0.0f);
  // A non-finite amax: reported, history and scale untouched (not poisoned).
  for (float bad : {kNaN, kInf, -kInf}) {
    u.found_inf = 0.0f;
    u.step(bad);
    EXPECT_EQ(u.found_inf, 1.0f);
    EXPECT_EQ(u.history, (std::vector<float>{1.0f, 1.0f, 1.0f}));
    EXPECT_EQ(u.scale, 256.0f);
  }
  // Margin 2 divides by 4; E5M2's max gives its own exponent.
  u.step(1.0f, DType::f8e4m3, 2);
  EXPECT_EQ(u.scale, 64.0f);
  u.step(1.0f, DType::f8e5m2, 0);
  EXPECT_EQ(u.scale, 32768.0f);
}

TEST(Fp8ScaleUpdate, HistoryOfOneIsCurrentScaling) {
  Update u{{0.0f}};
  for (float a : {3.0f, 3000.0f, 0.001f}) {
    u.step(a);
    EXPECT_EQ(u.history[0], a);
    EXPECT_EQ(u.scale, oracle_scale(a, 448.0, 0));
  }
  u.step(0.0f);  // an all-zero tensor keeps the last scale
  EXPECT_EQ(u.scale, oracle_scale(0.001, 448.0, 0));
}

TEST(Fp8ScaleUpdate, CpuEntryRunsTheReference) {
  Update r{std::vector<float>(4, 0.0f)}, c{std::vector<float>(4, 0.0f)};
  for (float a : {2.0f, 0.0f, 9e3f, kNaN, 1e-20f, 5.0f}) {
    r.step(a, DType::f8e5m2, 1, "ref");
    c.step(a, DType::f8e5m2, 1, "cpu");
    EXPECT_EQ(std::bit_cast<std::uint32_t>(r.scale), std::bit_cast<std::uint32_t>(c.scale));
    EXPECT_EQ(r.history, c.history);
    EXPECT_EQ(r.found_inf, c.found_inf);
  }
}

TEST(Fp8ScaleUpdate, RefusesBadArguments) {
  Update u{{0.0f}};
  float a = 1.0f;
  EXPECT_THROW(ref_backend().fp8_scale_update(u.history.data(), 0, &a, &u.scale, DType::f8e4m3, 0,
                                              nullptr),
               ValueError);
  EXPECT_THROW(u.step(1.0f, DType::f8e4m3, -1), ValueError);
  EXPECT_THROW(u.step(1.0f, DType::f8e4m3, 65), ValueError);
  EXPECT_THROW(u.step(1.0f, DType::f16, 0), DTypeError);
}

}  // namespace
}  // namespace mixprec::kernels
