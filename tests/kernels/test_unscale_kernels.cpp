// The fused unscale + non-finite check kernel: AVX-512 and the dispatcher (serial and OpenMP
// sizes) against the scalar reference, bit for bit; detection of +Inf, -Inf and NaN at the
// first, a middle and the last (tail) element; overflow of the product; 16-bit gradients.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/unscale_kernels.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Sizes around the 16- and 32-lane loop boundaries, plus sizes above the OpenMP threshold
/// (32K) with a partial last chunk.
const std::size_t kSizes[] = {0,  1,  7,  15,  16,   17,    31,
                              32, 33, 47, 100, 1000, 32768, 65536 * 2 + 35};

/// Gradients spanning many binades, signs, zeros and f32 subnormals.
std::vector<float> random_grads(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-140, 120);
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = (i % 13 == 5) ? 0.0f : std::ldexp(mant(rng), expo(rng)) * (rng() & 1 ? -1.0f : 1.0f);
  }
  return g;
}

std::vector<std::uint32_t> bit_vector(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<std::uint32_t>(v[i]);
  return b;
}

/// Caps the ISA for one scope.
class IsaCap {
 public:
  explicit IsaCap(Isa cap) { set_max_isa(cap); }
  ~IsaCap() { set_max_isa(saved_); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;

 private:
  Isa saved_ = max_isa();
};

/// The dispatcher on a copy of g, with the ISA capped at `isa`; returns the verdict.
bool dispatch_on(std::vector<float>& g, float inv, Isa isa) {
  const IsaCap cap(isa);
  return unscale_inplace(g.data(), kUnscaleF32, g.size(), inv);
}

// Inverse scales: powers of two (exact), a non-power of two (rounded products), and one > 1
// (scale below 1) under which large gradients overflow.
const float kInverses[] = {1.0f / 65536.0f, 1.0f / 3000.0f, 1024.0f};

TEST(GradScalerKernel, MatchesReferenceBitForBit) {
  const bool have_avx512 = max_isa() >= Isa::avx512;
  for (std::size_t n : kSizes) {
    for (float inv : kInverses) {
      const std::vector<float> g = random_grads(n, static_cast<std::uint32_t>(n) + 7);
      std::vector<float> ref(n);
      const bool ref_found = unscale_f32_ref(g.data(), ref.data(), n, inv);
      std::vector<float> scalar = g;
      EXPECT_EQ(dispatch_on(scalar, inv, Isa::scalar), ref_found) << n;
      EXPECT_EQ(bit_vector(scalar), bit_vector(ref)) << n;
      if (!have_avx512) continue;
      std::vector<float> out(n);
      EXPECT_EQ(unscale_f32_avx512(g.data(), out.data(), n, inv), ref_found) << n;
      EXPECT_EQ(bit_vector(out), bit_vector(ref)) << n << " inv " << inv;
      std::vector<float> vec = g;
      EXPECT_EQ(dispatch_on(vec, inv, Isa::avx512), ref_found) << n;
      EXPECT_EQ(bit_vector(vec), bit_vector(ref)) << n;
    }
  }
  // With inv = 1024 the largest gradients (up to 2^121) overflow: that verdict must be true.
  std::vector<float> g = random_grads(1000, 1007);
  EXPECT_TRUE(dispatch_on(g, 1024.0f, max_isa()));
  if (!have_avx512) GTEST_SKIP() << "no AVX-512 on this CPU: only the reference was checked";
}

TEST(GradScalerKernel, DetectsNonFiniteAtEveryPosition) {
  const bool have_avx512 = max_isa() >= Isa::avx512;
  for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{33}, std::size_t{100003}}) {
    const std::vector<float> clean = random_grads(n, 3);
    std::vector<float> tmp = clean;
    ASSERT_FALSE(unscale_f32_ref(clean.data(), tmp.data(), n, 1.0f / 65536.0f));
    for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {  // first, middle, last (tail)
      for (float bad : {kInf, -kInf, kNaN}) {
        std::vector<float> g = clean;
        g[at] = bad;
        std::vector<float> ref(n);
        EXPECT_TRUE(unscale_f32_ref(g.data(), ref.data(), n, 1.0f / 65536.0f)) << n << "@" << at;
        std::vector<float> s = g;
        EXPECT_TRUE(dispatch_on(s, 1.0f / 65536.0f, Isa::scalar)) << n << "@" << at;
        if (!have_avx512) continue;
        std::vector<float> v(n);
        EXPECT_TRUE(unscale_f32_avx512(g.data(), v.data(), n, 1.0f / 65536.0f))
            << n << "@" << at << " value " << bad;
        EXPECT_EQ(bit_vector(v), bit_vector(ref));
        std::vector<float> d = g;
        EXPECT_TRUE(dispatch_on(d, 1.0f / 65536.0f, Isa::avx512)) << n << "@" << at;
      }
    }
  }
  if (!have_avx512) GTEST_SKIP() << "no AVX-512 on this CPU: only the reference was checked";
}

TEST(GradScalerKernel, SixteenBitReference) {
  // bf16 and f16: widen, multiply in f32, round once; the verdict also sees 16-bit overflow.
  const std::vector<float> values = {1.5f, -3.0f, 0.0f, 6.0e-5f, 1000.0f, 40000.0f};
  for (int dtype : {kUnscaleBF16, kUnscaleF16}) {
    const auto enc = [&](float x) {
      return dtype == kUnscaleBF16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
    };
    const auto dec = [&](std::uint16_t b) {
      return dtype == kUnscaleBF16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
    };
    std::vector<std::uint16_t> g;
    for (float v : values) g.push_back(enc(v));
    std::vector<std::uint16_t> out(g.size());
    EXPECT_FALSE(unscale_16bit_ref(g.data(), out.data(), g.size(), 0.25f, dtype));
    for (std::size_t i = 0; i < g.size(); ++i) EXPECT_EQ(out[i], enc(dec(g[i]) * 0.25f)) << i;
    // x2: 40000 * 2 overflows f16 (max 65504) but not bf16.
    EXPECT_EQ(unscale_16bit_ref(g.data(), out.data(), g.size(), 2.0f, dtype), dtype == kUnscaleF16);
    g[3] = enc(kNaN);
    EXPECT_TRUE(unscale_16bit_ref(g.data(), out.data(), g.size(), 0.25f, dtype));
    std::vector<std::uint16_t> in_place = g;
    EXPECT_TRUE(unscale_inplace(in_place.data(), dtype, in_place.size(), 0.25f));
    EXPECT_EQ(in_place, out);
  }
}

}  // namespace
}  // namespace mixprec::kernels
