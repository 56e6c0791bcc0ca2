// The amax that the fused unscale pass measures for predictive loss scaling: the scalar reference
// against a plain oracle (the largest finite |x * inv|), the cpu backend on every Highway target
// this CPU has (serial and OpenMP sizes) against the reference bit for bit, Inf/NaN inputs and
// overflowing products left out of amax at every lane position, a caller's starting value
// respected, outputs and verdicts the same with and without amax, and 16-bit gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/unscale.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Around the 16- and 32-lane boundaries, and above the OpenMP threshold (32K) with a partial
/// last chunk.
const std::size_t kSizes[] = {0,  1,   7,    15,    16,
                              17, 31,  32,   33,    47,
                              100, 1000, 40000, 65536 * 2 + 35};
/// Exact (power of two), rounded (1/3000), and one under which large gradients overflow.
const float kInverses[] = {1.0f / 65536.0f, 1.0f / 3000.0f, 1024.0f};

/// Gradients over many binades with both signs, zeros and f32 subnormals; the largest magnitude
/// sits at a varying position and is sometimes negative.
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

/// The specification written out plainly: the largest |x * inv| that is finite, raised from start.
float oracle_amax(const std::vector<float>& g, float inv, float start = 0.0f) {
  float a = start;
  for (const float x : g) {
    const float y = x * inv;
    if (std::isfinite(y) && std::fabs(y) > a) a = std::fabs(y);
  }
  return a;
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

using ktest::IsaCap;
using ktest::isas_to_test;

/// The dispatcher on a copy of g with the ISA capped; returns {verdict, amax}.
std::pair<bool, float> dispatch_amax(std::vector<float> g, float inv, Isa isa, float start = 0.0f) {
  const IsaCap cap(isa);
  float amax = start;
  const bool found = cpu::unscale_inplace(g.data(), DType::f32, g.size(), inv, &amax);
  return {found, amax};
}

TEST(UnscaleAmax, ReferenceMatchesThePlainSpecification) {
  for (std::size_t n : kSizes) {
    for (float inv : kInverses) {
      const std::vector<float> g = random_grads(n, static_cast<std::uint32_t>(n) * 3 + 1);
      std::vector<float> out(n);
      float amax = 0.0f;
      const bool found = unscale_f32_ref(g.data(), out.data(), n, inv, &amax);
      EXPECT_EQ(bits(amax), bits(oracle_amax(g, inv))) << n << " inv " << inv;
      // Requesting amax changes neither the outputs nor the verdict.
      std::vector<float> plain(n);
      EXPECT_EQ(unscale_f32_ref(g.data(), plain.data(), n, inv), found);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits(out[i]), bits(plain[i])) << i;
    }
  }
  // The largest magnitude is negative: amax is its absolute value.
  const std::vector<float> g = {0.5f, -96.0f, 3.0f, -0.0f};
  float amax = 0.0f;
  std::vector<float> out(g.size());
  EXPECT_FALSE(unscale_f32_ref(g.data(), out.data(), g.size(), 0.5f, &amax));
  EXPECT_EQ(amax, 48.0f);
}

TEST(UnscaleAmax, EveryTargetMatchesTheReferenceBitForBit) {
  for (std::size_t n : kSizes) {
    for (float inv : kInverses) {
      const std::vector<float> g = random_grads(n, static_cast<std::uint32_t>(n) + 11);
      std::vector<float> ref(n);
      float ref_amax = 0.0f;
      const bool ref_found = unscale_f32_ref(g.data(), ref.data(), n, inv, &ref_amax);
      for (const Isa isa : isas_to_test()) {
        const IsaCap cap(isa);
        std::vector<float> out = g;
        float amax = 0.0f;
        EXPECT_EQ(cpu::unscale_inplace(out.data(), DType::f32, n, inv, &amax), ref_found)
            << n << " " << name(isa);
        EXPECT_EQ(bits(amax), bits(ref_amax)) << n << " inv " << inv << " " << name(isa);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits(out[i]), bits(ref[i])) << n << "@" << i;
      }
    }
  }
}

TEST(UnscaleAmax, NonFiniteElementsStayOutOfAmax) {
  const float inv = 1.0f / 65536.0f;
  // Every lane position of the first vectors (any target has at most 16 f32 lanes here) and
  // the tail, then first / middle / last and chunk boundaries of an OpenMP size.
  std::vector<std::pair<std::size_t, std::size_t>> cases;  // (n, position)
  for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{40}}) {
    for (std::size_t at = 0; at < n; ++at) cases.emplace_back(n, at);
  }
  for (std::size_t at : {std::size_t{0}, std::size_t{65535}, std::size_t{65536}, std::size_t{100002}}) {
    cases.emplace_back(100003, at);
  }
  std::size_t last_n = 0;
  std::vector<float> clean;
  for (const auto& [n, at] : cases) {
    if (n != last_n) clean = random_grads(n, 5), last_n = n;
    for (float bad : {kInf, -kInf, kNaN}) {
      std::vector<float> g = clean;
      g[at] = bad;
      const float expected = oracle_amax(g, inv);  // the other elements' maximum
      ASSERT_TRUE(std::isfinite(expected));
      std::vector<float> out(n);
      float amax = 0.0f;
      EXPECT_TRUE(unscale_f32_ref(g.data(), out.data(), n, inv, &amax));
      EXPECT_EQ(bits(amax), bits(expected)) << n << "@" << at << " " << bad;
      for (const Isa isa : isas_to_test()) {
        const auto [found, a] = dispatch_amax(g, inv, isa);
        EXPECT_TRUE(found) << n << "@" << at << " " << bad << " " << name(isa);
        EXPECT_EQ(bits(a), bits(expected)) << n << "@" << at << " " << bad << " " << name(isa);
      }
    }
  }
  // A product that overflows (finite input, Inf output) is left out too; every element bad:
  // amax keeps its starting value.
  for (const Isa isa : isas_to_test()) {
    const auto [found, amax] = dispatch_amax({3e38f, 1.0f, -2.0f}, 4.0f, isa);
    EXPECT_TRUE(found);
    EXPECT_EQ(amax, 8.0f);
    for (std::size_t n : {std::size_t{5}, std::size_t{40}}) {
      const auto [all_found, all_amax] =
          dispatch_amax(std::vector<float>(n, kNaN), 1.0f, isa, 0.25f);
      EXPECT_TRUE(all_found);
      EXPECT_EQ(all_amax, 0.25f) << n << " " << name(isa);
    }
  }
}

TEST(UnscaleAmax, StartingValueIsRaisedNeverLowered) {
  // Callers chain calls over several gradients: amax only ever grows, and one call over the
  // concatenation equals the chained calls.
  const std::vector<float> a = random_grads(1000, 21);
  const std::vector<float> b = random_grads(50000, 22);
  std::vector<float> both = a;
  both.insert(both.end(), b.begin(), b.end());
  const float inv = 1.0f / 3000.0f;
  for (const Isa isa : isas_to_test()) {
    const float whole = dispatch_amax(both, inv, isa).second;
    const float first = dispatch_amax(a, inv, isa).second;
    const float chained = dispatch_amax(b, inv, isa, first).second;
    EXPECT_EQ(bits(chained), bits(whole));
    EXPECT_EQ(bits(whole), bits(oracle_amax(both, inv)));
    // A start above every element (they reach 2^121 / 3000 < 1e33) survives, serial and OpenMP.
    EXPECT_EQ(dispatch_amax(a, inv, isa, 1e34f).second, 1e34f);
    EXPECT_EQ(dispatch_amax(b, inv, isa, 1e34f).second, 1e34f);
  }
}

TEST(UnscaleAmax, SixteenBitGradients) {
  // amax is taken on the rounded 16-bit results; an f16 overflow (Inf after rounding) and NaN
  // stay out of it.
  const std::vector<float> values = {1.5f, -3.0f, 0.0f, 6.0e-5f, 1000.0f, -40000.0f};
  for (DType dtype : {DType::bf16, DType::f16}) {
    const auto enc = [&](float x) {
      return dtype == DType::bf16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
    };
    const auto dec = [&](std::uint16_t b) {
      return dtype == DType::bf16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
    };
    std::vector<std::uint16_t> g;
    for (float v : values) g.push_back(enc(v));
    for (float inv : {0.25f, 1.0f / 3.0f, 2.0f}) {
      float expected = 0.0f;
      for (std::uint16_t x : g) {
        const float y = dec(enc(dec(x) * inv));
        if (std::isfinite(y)) expected = std::max(expected, std::fabs(y));
      }
      std::vector<std::uint16_t> out(g.size());
      float amax = 0.0f;
      const bool found = unscale_16bit_ref(g.data(), out.data(), g.size(), inv, dtype, &amax);
      EXPECT_EQ(amax, expected) << name(dtype) << " inv " << inv;
      // x2: -40000 * 2 overflows f16 (max 65504), so f16 reports it and its amax is 1000 * 2;
      // bf16 has the range and reports twice its rounding of 40000 (39936).
      if (inv == 2.0f) {
        EXPECT_EQ(found, dtype == DType::f16);
        EXPECT_EQ(amax, dtype == DType::f16 ? 2000.0f : 79872.0f);
      }
      for (const Isa isa : isas_to_test()) {
        const IsaCap cap(isa);
        std::vector<std::uint16_t> in_place = g;
        float d_amax = 0.0f;
        EXPECT_EQ(cpu::unscale_inplace(in_place.data(), dtype, in_place.size(), inv, &d_amax),
                  found);
        EXPECT_EQ(in_place, out);
        EXPECT_EQ(d_amax, amax) << name(isa);
      }
    }
    g[4] = enc(kNaN);
    float amax = 0.0f;
    std::vector<std::uint16_t> out(g.size());
    EXPECT_TRUE(unscale_16bit_ref(g.data(), out.data(), g.size(), 1.0f, dtype, &amax));
    EXPECT_EQ(amax, dtype == DType::f16 ? 40000.0f : 39936.0f);  // NaN left out
  }
}

// The multi-tensor unscale: a batch of gradients of every dtype and size (empty ones, one past
// the OpenMP threshold, an Inf in one of them or none) gives each gradient the bits one unscale
// call per gradient gives it, the same flag and the same amax, on the reference and on every
// target; the flag is left alone when nothing is found.
TEST(UnscaleAmax, BatchEqualsOneCallPerGradient) {
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f16};
  for (const bool poison : {false, true}) {
    std::vector<std::vector<std::uint8_t>> start;
    std::vector<DType> kinds;
    std::vector<std::size_t> counts;
    for (std::size_t k = 0; k < 12; ++k) {
      const std::size_t n = kSizes[(3 * k + 1) % std::size(kSizes)];
      const DType dtype = dtypes[k % 3];
      std::vector<float> g = random_grads(n, static_cast<std::uint32_t>(70 + k));
      for (float& x : g) x = std::ldexp(x, -110);  // below 2^11: finite in f16 too
      if (poison && k == 7 && n > 3) g[n / 2] = kInf;
      std::vector<std::uint8_t> bytes(n * (dtype == DType::f32 ? 4 : 2));
      for (std::size_t i = 0; i < n; ++i) {
        if (dtype == DType::f32) {
          std::memcpy(bytes.data() + 4 * i, &g[i], 4);
        } else {
          const std::uint16_t h = dtype == DType::bf16 ? f32_to_bf16_bits(g[i]) : f32_to_f16_bits(g[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
      }
      start.push_back(std::move(bytes));
      kinds.push_back(dtype);
      counts.push_back(n);
    }
    const float inv = 1.0f / 3000.0f;
    // One call per gradient, through the reference.
    auto want = start;
    float want_flag = 0.0f, want_amax = 0.25f;
    for (std::size_t k = 0; k < want.size(); ++k) {
      ref::unscale(want[k].data(), kinds[k], counts[k], inv, &want_flag, &want_amax);
    }
    EXPECT_EQ(want_flag, poison ? 1.0f : 0.0f);
    const auto batched = [&](void (*entry)(const UnscaleBatch&), const std::string& where) {
      auto got = start;
      float flag = 0.0f, amax = 0.25f;
      UnscaleBatch batch{};
      batch.inv = inv;
      batch.found_inf = &flag;
      batch.amax = &amax;
      for (std::size_t k = 0; k < got.size(); ++k) {
        batch.runs[batch.size++] = {got[k].data(), kinds[k], counts[k]};
      }
      entry(batch);
      EXPECT_EQ(flag, want_flag) << where;
      EXPECT_EQ(bits(amax), bits(want_amax)) << where;
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], want[k]) << where << ", gradient " << k;
    };
    batched(&ref::unscale_batch, "reference");
    for (const Isa isa : ktest::isas_to_test()) {
      IsaCap cap(isa);
      batched(&cpu::unscale_batch, std::string(name(isa)) + " (" + simd_target() + ")");
    }
  }
}

}  // namespace
}  // namespace mixprec::kernels
