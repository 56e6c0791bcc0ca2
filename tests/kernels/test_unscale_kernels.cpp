// The fused unscale + non-finite check: the cpu backend on every Highway target this CPU has
// (serial and OpenMP sizes) against the scalar reference, bit for bit, for f32, bf16 and f16
// gradients; every 16-bit pattern; detection of +Inf, -Inf, NaN (and 16-bit overflow of the
// product) at every lane position of the first vectors and tails and at chunk boundaries.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cpu_class_expect.h"
#include "kernels/kernel_test_util.h"
#include "kernels/unscale.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/half.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using ktest::IsaCap;
using ktest::isas_to_test;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Sizes around 4-, 8- and 16-lane vectors, plus sizes above the OpenMP threshold (32K) with a
/// partial last chunk.
const std::size_t kSizes[] = {0,  1,  3,  4,   5,    7,     8,    9,  15,
                              16, 17, 31, 33,  47,   100,   1000, 32768, 65536 * 2 + 35};

// Inverse scales: powers of two (exact), a non-power of two (rounded products), and one > 1
// (scale below 1) under which large gradients overflow.
const float kInverses[] = {1.0f / 65536.0f, 1.0f / 3000.0f, 1024.0f};

const DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};
const char* dtype_name(DType d) { return d == DType::f32 ? "f32" : d == DType::bf16 ? "bf16" : "f16"; }

/// Gradients spanning many binades (by default -140..120: f32 subnormals to near the f32 max),
/// signs and zeros, as f32 values.
std::vector<float> random_values(std::size_t n, std::uint32_t seed, int min_exp = -140,
                                 int max_exp = 120) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(min_exp, max_exp);
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = (i % 13 == 5) ? 0.0f : std::ldexp(mant(rng), expo(rng)) * (rng() & 1 ? -1.0f : 1.0f);
  }
  return g;
}

/// Gradient elements as raw 32-bit (f32) or 16-bit (bf16/f16, rounded to nearest even) patterns.
struct Grads {
  DType dtype;
  std::vector<float> f32;
  std::vector<std::uint16_t> h16;

  Grads(DType d, const std::vector<float>& values) : dtype(d) {
    if (d == DType::f32) {
      f32 = values;
    } else {
      for (const float v : values) h16.push_back(encode(v));
    }
  }
  std::uint16_t encode(float v) const {
    return dtype == DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
  }
  void set(std::size_t i, float v) {
    if (dtype == DType::f32) {
      f32[i] = v;
    } else {
      h16[i] = encode(v);
    }
  }
  std::size_t size() const { return dtype == DType::f32 ? f32.size() : h16.size(); }
  void* data() { return dtype == DType::f32 ? static_cast<void*>(f32.data()) : h16.data(); }
  bool same_bits(const Grads& o) const {
    if (dtype == DType::f32) {
      for (std::size_t i = 0; i < f32.size(); ++i) {
        if (std::bit_cast<std::uint32_t>(f32[i]) != std::bit_cast<std::uint32_t>(o.f32[i])) return false;
      }
      return f32.size() == o.f32.size();
    }
    return h16 == o.h16;
  }
};

struct Result {
  bool found;
  float amax;
};

/// The reference, in place on g.
Result reference(Grads& g, float inv, bool with_amax) {
  float amax = 0.0f;
  const bool found = ref::unscale_inplace(g.data(), g.dtype, g.size(), inv, with_amax ? &amax : nullptr);
  return {found, amax};
}

/// The cpu backend capped at `isa`, in place on g.
Result on_target(Grads& g, float inv, bool with_amax, Isa isa) {
  const IsaCap cap(isa);
  float amax = 0.0f;
  const bool found = cpu::unscale_inplace(g.data(), g.dtype, g.size(), inv, with_amax ? &amax : nullptr);
  return {found, amax};
}

/// Checks every target against the reference on a copy of g (outputs, verdict, amax).
void expect_targets_match(const Grads& g, float inv, const std::string& what) {
  for (const bool with_amax : {false, true}) {
    Grads want = g;
    const Result r = reference(want, inv, with_amax);
    for (const Isa isa : isas_to_test()) {
      Grads got = g;
      const Result c = on_target(got, inv, with_amax, isa);
      EXPECT_EQ(c.found, r.found) << what << " " << name(isa);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(c.amax), std::bit_cast<std::uint32_t>(r.amax))
          << what << " " << name(isa);
      EXPECT_TRUE(got.same_bits(want)) << what << " " << name(isa) << (with_amax ? " amax" : "");
    }
  }
}

TEST(GradScalerKernel, EveryTargetMatchesReferenceBitForBit) {
  for (const DType dtype : kDTypes) {
    for (const std::size_t n : kSizes) {
      for (const float inv : kInverses) {
        // f16 gradients within its range (subnormals to 2^15), so verdicts can be false.
        const auto seed = static_cast<std::uint32_t>(n) + 7;
        const Grads g(dtype, dtype == DType::f16 ? random_values(n, seed, -26, 14)
                                                  : random_values(n, seed));
        expect_targets_match(g, inv,
                             std::string(dtype_name(dtype)) + " n " + std::to_string(n) +
                                 " inv " + std::to_string(inv));
      }
    }
  }
  // With inv = 1024 the largest gradients (up to 2^121) overflow: that verdict must be true.
  for (const Isa isa : isas_to_test()) {
    Grads g(DType::f32, random_values(1000, 1007));
    EXPECT_TRUE(on_target(g, 1024.0f, false, isa).found) << name(isa);
  }
}

TEST(GradScalerKernel, EverySixteenBitPatternMatchesReference) {
  // Every bf16/f16 pattern (Inf, NaN payloads, subnormals) widened, scaled and rounded back,
  // under an exact, a rounding, an overflowing and a subnormal-producing inverse scale.
  for (const DType dtype : {DType::bf16, DType::f16}) {
    Grads g(dtype, {});
    for (std::uint32_t h = 0; h < 0x10000; ++h) g.h16.push_back(static_cast<std::uint16_t>(h));
    for (const float inv : {1.0f, 1.0f / 3000.0f, 3.0f, 0x1p-20f}) {
      expect_targets_match(g, inv, std::string(dtype_name(dtype)) + " inv " + std::to_string(inv));
    }
  }
}

TEST(GradScalerKernel, DetectsNonFiniteAtEveryLanePosition) {
  // Every position of n = 1..40 (every lane of the first vectors and of the tails on any
  // target), then first / chunk boundary / last of an OpenMP size.
  std::vector<std::pair<std::size_t, std::size_t>> cases;  // (n, position)
  for (std::size_t n = 1; n <= 40; ++n) {
    for (std::size_t at = 0; at < n; ++at) cases.emplace_back(n, at);
  }
  for (const std::size_t at : {std::size_t{0}, std::size_t{65535}, std::size_t{65536}, std::size_t{100002}}) {
    cases.emplace_back(100003, at);
  }
  const float inv = 1.0f / 4.0f;
  for (const DType dtype : kDTypes) {
    // Values in [-2, 2): finite in every dtype; 40000 * 2 overflows f16 only (inv 2 below).
    std::vector<float> values(100003);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (float& v : values) v = dist(rng);
    for (const auto& [n, at] : cases) {
      const Grads clean(dtype, std::vector<float>(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n)));
      std::vector<std::pair<float, float>> bad = {{kInf, inv}, {-kInf, inv}, {kNaN, inv}};
      if (dtype == DType::f16) bad.emplace_back(40000.0f, 2.0f);  // finite input, Inf output
      for (const auto& [value, scale] : bad) {
        Grads g = clean;
        g.set(at, value);
        const std::string what = std::string(dtype_name(dtype)) + " n " + std::to_string(n) + "@" +
                                 std::to_string(at) + " value " + std::to_string(value);
        Grads want = g;
        float ref_amax = 0.0f;
        ASSERT_TRUE(ref::unscale_inplace(want.data(), dtype, n, scale, &ref_amax)) << what;
        for (const Isa isa : isas_to_test()) {
          Grads got = g;
          const Result c = on_target(got, scale, true, isa);
          EXPECT_TRUE(c.found) << what << " " << name(isa);
          EXPECT_EQ(std::bit_cast<std::uint32_t>(c.amax), std::bit_cast<std::uint32_t>(ref_amax))
              << what << " " << name(isa);
          EXPECT_TRUE(got.same_bits(want)) << what << " " << name(isa);
          Grads plain = g;
          EXPECT_TRUE(on_target(plain, scale, false, isa).found) << what << " " << name(isa);
        }
      }
    }
  }
}

TEST(GradScalerKernel, SixteenBitReference) {
  // bf16 and f16: widen, multiply in f32, round once; the verdict also sees 16-bit overflow.
  const std::vector<float> values = {1.5f, -3.0f, 0.0f, 6.0e-5f, 1000.0f, 40000.0f};
  for (DType dtype : {DType::bf16, DType::f16}) {
    const auto enc = [&](float x) {
      return dtype == DType::bf16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
    };
    const auto dec = [&](std::uint16_t b) {
      return dtype == DType::bf16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
    };
    std::vector<std::uint16_t> g;
    for (float v : values) g.push_back(enc(v));
    std::vector<std::uint16_t> out(g.size());
    EXPECT_FALSE(unscale_16bit_ref(g.data(), out.data(), g.size(), 0.25f, dtype));
    for (std::size_t i = 0; i < g.size(); ++i) EXPECT_EQ(out[i], enc(dec(g[i]) * 0.25f)) << i;
    // x2: 40000 * 2 overflows f16 (max 65504) but not bf16.
    EXPECT_EQ(unscale_16bit_ref(g.data(), out.data(), g.size(), 2.0f, dtype), dtype == DType::f16);
    g[3] = enc(kNaN);
    EXPECT_TRUE(unscale_16bit_ref(g.data(), out.data(), g.size(), 0.25f, dtype));
    std::vector<std::uint16_t> in_place = g;
    EXPECT_TRUE(unscale_inplace(in_place.data(), dtype, in_place.size(), 0.25f));
    EXPECT_EQ(in_place, out);
  }
}

TEST(GradScalerKernel, VerboseNamesTheTargetThatRan) {
  std::set<std::string> targets;
  for (const Isa isa : isas_to_test()) {
    const IsaCap cap(isa);
    std::vector<std::uint16_t> g(5, f32_to_bf16_bits(1.0f));
    const bool was = verbose_enabled();
    set_verbose(true);
    testing::internal::CaptureStderr();
    cpu::unscale_inplace(g.data(), DType::bf16, g.size(), 0.5f);
    const std::string log = testing::internal::GetCapturedStderr();
    set_verbose(was);
    EXPECT_NE(log.find(std::string("mixprec: unscale bf16: ran ") + simd_target()), std::string::npos)
        << log;
    EXPECT_TRUE(target_matches(ctest::expected_target(isa), simd_target()))
        << name(isa) << " ran " << simd_target() << ", the CPU class table says "
        << ctest::expected_target(isa);
    targets.insert(simd_target());
  }
  // As many different targets as the table gives the levels (avx512 and avx512_bf16 share one;
  // under a profile above the real CPU, several levels run the real CPU's best).
  EXPECT_EQ(targets.size(), ctest::expected_distinct_targets());
}

}  // namespace
}  // namespace mixprec::kernels
