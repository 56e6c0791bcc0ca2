// Round-to-nearest-even conversions: every 16-bit pattern, every fp32 pattern against an
// independent reference, named edge cases, and vector paths against scalar ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/convert_test_util.h"
#include "mixprec/core/convert.h"
#include "mixprec/core/verbose.h"

namespace mixprec {
namespace {

using test::conversion_caps;
using test::IsaCapGuard;

// ---------------------------------------------------------------------------------------------
// Independent reference: value arithmetic in double, not the bit tricks of half.h.

struct Format {
  int mant_bits;  // stored mantissa bits
  int emin;       // exponent of the smallest normal
  int emax;       // exponent of the largest finite binade (= bias)
};
constexpr Format kBf16{7, -126, 127};
constexpr Format kF16{10, -14, 15};

double pow2(int k) {
  static const std::array<double, 601> table = [] {
    std::array<double, 601> t{};
    for (int i = 0; i < 601; ++i) t[i] = std::ldexp(1.0, i - 300);
    return t;
  }();
  return table[static_cast<std::size_t>(k + 300)];
}

std::uint16_t all_ones_exponent(const Format& f) {
  return static_cast<std::uint16_t>(((1u << (15 - f.mant_bits)) - 1u) << f.mant_bits);
}

/// Rounds an fp32 pattern to the format: scale |x| so one spacing of the format is 1, round the
/// integer significand half to even, and encode the rounded value from its frexp exponent.
std::uint16_t reference_round(std::uint32_t bits, const Format& f) {
  const float x = std::bit_cast<float>(bits);
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const std::uint16_t inf = all_ones_exponent(f);
  if (std::isnan(x)) {
    // A quiet NaN keeping the leading payload bits (what x86, ARM and GPUs do; IEEE allows it).
    const std::uint32_t payload = (bits & 0x7fffffu) >> (23 - f.mant_bits);
    return static_cast<std::uint16_t>(sign | inf | (1u << (f.mant_bits - 1)) | payload);
  }
  if (std::isinf(x)) return sign | inf;
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int spacing = std::max(e - 1, f.emin) - f.mant_bits;
  const double scaled = a * pow2(-spacing);  // exact
  double n = std::floor(scaled);
  const double rest = scaled - n;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) == 1.0)) n += 1.0;
  const double r = n * pow2(spacing);
  if (r >= pow2(f.emax + 1)) return sign | inf;
  if (r < pow2(f.emin)) return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(n));
  int e2 = 0;
  const double m = std::frexp(r, &e2);  // r = m 2^e2, m in [0.5, 1)
  const auto exponent = static_cast<std::uint32_t>(e2 - 1 + f.emax);
  const auto mantissa = static_cast<std::uint32_t>((2.0 * m - 1.0) * pow2(f.mant_bits));
  return static_cast<std::uint16_t>(sign | (exponent << f.mant_bits) | mantissa);
}

/// The value of a 16-bit pattern, from the IEEE formula (NaN for NaN patterns).
double reference_decode(std::uint16_t h, const Format& f) {
  const int exp_bits = 15 - f.mant_bits;
  const int e = (h >> f.mant_bits) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << f.mant_bits) - 1);
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m != 0 ? std::nan("") : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, f.emin - f.mant_bits);
  return s * std::ldexp(m + (1 << f.mant_bits), e - f.emax - f.mant_bits);
}

bool is_nan16(std::uint16_t h, const Format& f) {
  const std::uint16_t inf = all_ones_exponent(f);
  return (h & inf) == inf && (h & ((1u << f.mant_bits) - 1u)) != 0;
}

std::uint32_t f32_bits(float v) { return std::bit_cast<std::uint32_t>(v); }
float f32_from(std::uint32_t b) { return std::bit_cast<float>(b); }

std::string hex(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

TEST(ConvertReference, AgreesWithHandPickedValues) {
  // Guards the guard: if the reference itself were wrong, the sweep would prove nothing.
  EXPECT_EQ(reference_round(f32_bits(1.0f), kF16), 0x3c00);
  EXPECT_EQ(reference_round(f32_bits(65504.0f), kF16), 0x7bff);
  EXPECT_EQ(reference_round(f32_bits(65520.0f), kF16), 0x7c00);
  EXPECT_EQ(reference_round(f32_bits(0x1p-24f), kF16), 0x0001);
  EXPECT_EQ(reference_round(f32_bits(-0x1.8p-24f), kF16), 0x8002);
  EXPECT_EQ(reference_round(f32_bits(1.0f), kBf16), 0x3f80);
  EXPECT_EQ(reference_round(0x00018000u, kBf16), 0x0002);
  EXPECT_EQ(reference_round(0x7f7f8000u, kBf16), 0x7f80);
  EXPECT_EQ(reference_decode(0x7bff, kF16), 65504.0);
  EXPECT_EQ(reference_decode(0x0001, kF16), std::ldexp(1.0, -24));
  EXPECT_EQ(reference_decode(0x7f7f, kBf16), traits(DType::bf16).max);
}

// ---------------------------------------------------------------------------------------------
// (1) Every 16-bit pattern: exact widening, and 16 -> 32 -> 16 gives the pattern back.

template <class T>
void check_all_16bit_patterns(const Format& f, std::uint16_t quiet_bit) {
  const Format fmt = f;
  std::vector<T> all(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) all[h] = T::from_bits(static_cast<std::uint16_t>(h));
  std::vector<float> wide_scalar(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float w = static_cast<float>(all[h]);
    wide_scalar[h] = w;
    const double want = reference_decode(static_cast<std::uint16_t>(h), fmt);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(w)) << hex(h);
    } else {
      ASSERT_EQ(static_cast<double>(w), want) << hex(h);
      ASSERT_EQ(std::signbit(w), (h & 0x8000) != 0) << hex(h);
    }
    const std::uint16_t back = T(w).bits;
    const std::uint16_t expect = is_nan16(static_cast<std::uint16_t>(h), fmt)
                                     ? static_cast<std::uint16_t>(h | quiet_bit)
                                     : static_cast<std::uint16_t>(h);
    ASSERT_EQ(back, expect) << "round trip of " << hex(h);
  }
  IsaCapGuard guard;
  for (Isa cap : conversion_caps()) {
    SCOPED_TRACE(name(cap));
    set_max_isa(cap);
    std::vector<float> wide(65536);
    std::vector<T> back(65536);
    convert(all.data(), dtype_of<T>, wide.data(), DType::f32, all.size());
    convert(wide.data(), DType::f32, back.data(), dtype_of<T>, all.size());
    for (std::uint32_t h = 0; h < 65536; ++h) {
      ASSERT_EQ(f32_bits(wide[h]), f32_bits(wide_scalar[h])) << "widening " << hex(h);
      ASSERT_EQ(back[h].bits, T(wide_scalar[h]).bits) << "narrowing " << hex(h);
    }
  }
}

TEST(ConvertRoundTrip, EveryBf16PatternWidensExactlyAndComesBack) {
  check_all_16bit_patterns<bfloat16>(kBf16, 0x0040);
  // Widening bf16 is a shift: a signalling NaN stays signalling in fp32.
  EXPECT_EQ(f32_bits(bf16_bits_to_f32(0x7f81)), 0x7f810000u);
}

TEST(ConvertRoundTrip, EveryF16PatternWidensExactlyAndComesBack) {
  check_all_16bit_patterns<float16>(kF16, 0x0200);
  // Widening f16 quiets a signalling NaN and keeps its payload, as vcvtph2ps does.
  EXPECT_EQ(f32_bits(f16_bits_to_f32(0x7c01)), 0x7fc02000u);
  EXPECT_EQ(f32_bits(f16_bits_to_f32(0xfe00)), 0xffc00000u);
}

// ---------------------------------------------------------------------------------------------
// (2) Every fp32 pattern (a sample under sanitizers) against the reference: scalar functions
// and the bulk conversions at every ISA cap with a distinct kernel.

struct SweepState {
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  std::string first;
};

void check_patterns(const std::uint32_t* patterns, std::size_t n, SweepState& state) {
  const std::vector<Isa> caps = conversion_caps();
  std::vector<float> src(n);
  std::memcpy(src.data(), patterns, n * sizeof(float));
  std::vector<std::vector<bfloat16>> to_bf16(caps.size(), std::vector<bfloat16>(n));
  std::vector<std::vector<float16>> to_f16(caps.size(), std::vector<float16>(n));
  {
    IsaCapGuard guard;
    for (std::size_t c = 0; c < caps.size(); ++c) {
      set_max_isa(caps[c]);
      convert_f32_to_bf16(src.data(), to_bf16[c].data(), n);
      convert_f32_to_f16(src.data(), to_f16[c].data(), n);
    }
  }
  std::uint64_t bad = 0;
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) reduction(+ : bad)
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint16_t want_bf16 = reference_round(patterns[i], kBf16);
    const std::uint16_t want_f16 = reference_round(patterns[i], kF16);
    std::string what;
    if (f32_to_bf16_bits(src[i]) != want_bf16) what += " scalar-bf16";
    if (f32_to_f16_bits(src[i]) != want_f16) what += " scalar-f16";
    for (std::size_t c = 0; c < caps.size(); ++c) {
      if (to_bf16[c][i].bits != want_bf16) what += std::string(" bulk-bf16@") + name(caps[c]);
      if (to_f16[c][i].bits != want_f16) what += std::string(" bulk-f16@") + name(caps[c]);
    }
    if (!what.empty()) {
      ++bad;
#pragma omp critical(convert_sweep_first)
      if (state.first.empty()) {
        state.first = hex(patterns[i]) + " (want bf16 " + hex(want_bf16) + ", f16 " +
                      hex(want_f16) + "):" + what;
      }
    }
  }
  state.mismatches += bad;
  state.checked += n;
}

#ifdef MIXPREC_SANITIZER_BUILD
/// Every 4099th pattern, the specials, and each 16-bit value of both formats with its
/// neighbours and the ties around it (covers max, min normal, min subnormal and overflow).
std::vector<std::uint32_t> sample_patterns() {
  std::vector<std::uint32_t> p;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 4099) p.push_back(static_cast<std::uint32_t>(b));
  for (std::uint32_t s : {0x0u, 0x1u, 0x7fffffu, 0x800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
                          0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0x00008000u, 0x00018000u}) {
    p.push_back(s);
    p.push_back(s | 0x80000000u);
  }
  for (const Format* f : {&kBf16, &kF16}) {
    for (std::uint32_t h = 0; h < 0x8000; ++h) {
      const double v = reference_decode(static_cast<std::uint16_t>(h), *f);
      const double next = reference_decode(static_cast<std::uint16_t>(h + 1), *f);
      if (std::isnan(v) || std::isinf(v)) continue;
      const double tie = std::isinf(next) ? v + (v - reference_decode(static_cast<std::uint16_t>(h - 1), *f)) / 2
                                          : (v + next) / 2;
      for (double point : {v, tie}) {
        if (point > std::numeric_limits<float>::max()) continue;  // bf16 max's tie is 2^128 - 2^119: fine
        const std::uint32_t b = f32_bits(static_cast<float>(point));
        for (std::uint32_t d : {b - 1, b, b + 1}) {
          p.push_back(d & 0x7fffffffu);
          p.push_back(d | 0x80000000u);
        }
      }
    }
  }
  return p;
}
#endif

TEST(ConvertExhaustive, EveryF32PatternMatchesReferenceOnEveryPath) {
  SweepState state;
  constexpr std::size_t kBatch = std::size_t{1} << 20;
#ifdef MIXPREC_SANITIZER_BUILD
  const std::vector<std::uint32_t> all = sample_patterns();
  for (std::size_t i = 0; i < all.size(); i += kBatch) {
    check_patterns(all.data() + i, std::min(kBatch, all.size() - i), state);
  }
  EXPECT_GT(state.checked, 1000000u);
#else
  std::vector<std::uint32_t> batch(kBatch);
  for (std::uint64_t start = 0; start < (std::uint64_t{1} << 32); start += kBatch) {
    for (std::size_t i = 0; i < kBatch; ++i) batch[i] = static_cast<std::uint32_t>(start + i);
    check_patterns(batch.data(), kBatch, state);
  }
  EXPECT_EQ(state.checked, std::uint64_t{1} << 32);
#endif
  EXPECT_EQ(state.mismatches, 0u) << "first mismatch: " << state.first;
}

// ---------------------------------------------------------------------------------------------
// (3) Named edge cases, on the scalar functions and on every bulk path.

struct Edge {
  std::uint32_t in;   // fp32 pattern
  std::uint16_t out;  // expected 16-bit pattern
  const char* what;
};

template <class T>
void check_edges(const std::vector<Edge>& edges) {
  IsaCapGuard guard;
  std::vector<float> src;
  for (const Edge& e : edges) src.push_back(f32_from(e.in));
  for (Isa cap : conversion_caps()) {
    set_max_isa(cap);
    std::vector<T> dst(src.size());
    convert(src.data(), DType::f32, dst.data(), dtype_of<T>, src.size());
    for (std::size_t i = 0; i < edges.size(); ++i) {
      EXPECT_EQ(dst[i].bits, edges[i].out) << edges[i].what << " at " << name(cap);
      EXPECT_EQ(T(src[i]).bits, edges[i].out) << edges[i].what << " (scalar)";
    }
  }
}

TEST(ConvertEdgeCases, F16) {
  check_edges<float16>({
      {f32_bits(0.0f), 0x0000, "+0"},
      {f32_bits(-0.0f), 0x8000, "-0"},
      {f32_bits(INFINITY), 0x7c00, "+Inf"},
      {f32_bits(-INFINITY), 0xfc00, "-Inf"},
      {0x7fc00000u, 0x7e00, "quiet NaN"},
      {0xffc00001u, 0xfe00, "negative quiet NaN, low payload dropped"},
      {0x7f800001u, 0x7e00, "signalling NaN becomes quiet"},
      {0x7fa00000u, 0x7f00, "signalling NaN keeps its top payload bit"},
      {f32_bits(65504.0f), 0x7bff, "max 65504"},
      {f32_bits(65519.99f), 0x7bff, "65519.99 rounds down to max"},
      {f32_bits(65520.0f), 0x7c00, "65520, the tie above max, goes to Inf"},
      {f32_bits(-65520.0f), 0xfc00, "-65520 goes to -Inf"},
      {f32_bits(1e10f), 0x7c00, "far overflow"},
      {f32_bits(1.0f + 0x1p-11f), 0x3c00, "normal tie to even (down)"},
      {f32_bits(1.0f + 0x3p-11f), 0x3c02, "normal tie to even (up)"},
      {f32_bits(0x1p-14f), 0x0400, "min normal"},
      {f32_bits(0x3ffp-24f), 0x03ff, "max subnormal"},
      {f32_bits(0x7ffp-25f), 0x0400, "tie between max subnormal and min normal -> even"},
      {f32_bits(0x1p-24f), 0x0001, "min subnormal 2^-24"},
      {f32_bits(0x3p-25f), 0x0002, "subnormal tie 1.5 units -> 2"},
      {f32_bits(0x5p-25f), 0x0002, "subnormal tie 2.5 units -> 2"},
      {f32_bits(0x1p-25f), 0x0000, "2^-25, half the min subnormal -> 0"},
      {f32_bits(-0x1p-25f), 0x8000, "-2^-25 -> -0"},
      {f32_bits(0x1p-25f) + 1, 0x0001, "2^-25 (1 + 2^-23) -> 2^-24"},
      {0x00000001u, 0x0000, "fp32 denormal -> 0"},
      {0x807fffffu, 0x8000, "negative fp32 denormal -> -0"},
  });
}

TEST(ConvertEdgeCases, Bf16) {
  check_edges<bfloat16>({
      {f32_bits(0.0f), 0x0000, "+0"},
      {f32_bits(-0.0f), 0x8000, "-0"},
      {f32_bits(INFINITY), 0x7f80, "+Inf"},
      {f32_bits(-INFINITY), 0xff80, "-Inf"},
      {0x7fc00000u, 0x7fc0, "quiet NaN"},
      {0x7f800001u, 0x7fc0, "signalling NaN becomes quiet"},
      {0x7f810000u, 0x7fc1, "signalling NaN keeps its payload"},
      {0xff800001u, 0xffc0, "negative signalling NaN"},
      {0x7f7f0000u, 0x7f7f, "bf16 max"},
      {0x7f7f7fffu, 0x7f7f, "just below the tie above max"},
      {0x7f7f8000u, 0x7f80, "tie above max (odd max) -> Inf"},
      {0x7f7fffffu, 0x7f80, "fp32 max -> Inf"},
      {f32_bits(1.0f + 0x1p-8f), 0x3f80, "tie to even (down)"},
      {f32_bits(1.0f + 0x3p-8f), 0x3f82, "tie to even (up)"},
      {0x00400000u, 0x0040, "fp32 denormal exactly representable"},
      {0x00008000u, 0x0000, "denormal tie -> even 0"},
      {0x00008001u, 0x0001, "denormal just above the tie"},
      {0x00018000u, 0x0002, "denormal tie -> even 2"},
      {0x007fffffu, 0x0080, "largest denormal rounds up to min normal"},
      {0x807fffffu, 0x8080, "negative largest denormal"},
      {0x00000001u, 0x0000, "smallest denormal -> 0"},
  });
}

// ---------------------------------------------------------------------------------------------
// (4) Vector paths == scalar functions on random data, odd lengths, unaligned, tails untouched.

std::vector<std::uint32_t> random_f32_patterns(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<std::uint32_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = (i % 3 == 0) ? f32_bits(normal(gen)) : gen();
  return p;
}

TEST(ConvertBulk, EveryPairAtEveryCapMatchesScalarForOddLengths) {
  IsaCapGuard guard;
  constexpr std::uint16_t kSentinel = 0xdead;
  for (std::size_t n : {0u, 1u, 15u, 17u, 33u, 1000003u}) {
    const std::vector<std::uint32_t> raw = random_f32_patterns(n + 1, static_cast<std::uint32_t>(n));
    // Element 1 onwards: every source and destination is off a 64-byte boundary.
    std::vector<float> f32(n + 1);
    std::memcpy(f32.data(), raw.data(), raw.size() * 4);
    std::vector<std::uint16_t> h16(n + 1);
    for (std::size_t i = 0; i <= n; ++i) h16[i] = static_cast<std::uint16_t>(raw[i] >> 7);
    for (Isa cap : conversion_caps()) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " cap=" << name(cap));
      set_max_isa(cap);
      for (DType from : {DType::f32, DType::bf16, DType::f16}) {
        for (DType to : {DType::f32, DType::bf16, DType::f16}) {
          SCOPED_TRACE(std::string(name(from)) + "->" + name(to));
          const void* src = from == DType::f32 ? static_cast<const void*>(f32.data() + 1)
                                               : static_cast<const void*>(h16.data() + 1);
          std::vector<std::uint32_t> dst(n + 2, 0xdeadbeefu);  // room for f32; sentinel after
          std::vector<std::uint16_t> dst16(n + 2, kSentinel);
          void* out = to == DType::f32 ? static_cast<void*>(dst.data() + 1)
                                       : static_cast<void*>(dst16.data() + 1);
          convert(src, from, out, to, n);
          for (std::size_t i = 0; i < n; ++i) {
            const float x = from == DType::f32    ? f32[i + 1]
                            : from == DType::bf16 ? bf16_bits_to_f32(h16[i + 1])
                                                  : f16_bits_to_f32(h16[i + 1]);
            if (to == DType::f32) {
              const std::uint32_t want = from == DType::f32 ? raw[i + 1] : f32_bits(x);
              ASSERT_EQ(dst[i + 1], want) << "i=" << i;
            } else {
              const std::uint16_t want = from == to            ? h16[i + 1]
                                         : to == DType::bf16 ? f32_to_bf16_bits(x)
                                                             : f32_to_f16_bits(x);
              ASSERT_EQ(dst16[i + 1], want) << "i=" << i;
            }
          }
          EXPECT_EQ(dst[0], 0xdeadbeefu);
          EXPECT_EQ(dst[n + 1], 0xdeadbeefu) << "wrote past the end";
          EXPECT_EQ(dst16[0], kSentinel);
          EXPECT_EQ(dst16[n + 1], kSentinel) << "wrote past the end";
        }
      }
    }
  }
}

TEST(ConvertBulk, TypedEntryPointsMatchScalar) {
  IsaCapGuard guard;
  const std::size_t n = 4099;
  const std::vector<std::uint32_t> raw = random_f32_patterns(n, 7);
  std::vector<float> src(n);
  std::memcpy(src.data(), raw.data(), n * 4);
  for (Isa cap : conversion_caps()) {
    SCOPED_TRACE(name(cap));
    set_max_isa(cap);
    std::vector<bfloat16> b(n);
    std::vector<float16> h(n);
    std::vector<float> wb(n), wh(n);
    convert_f32_to_bf16(src.data(), b.data(), n);
    convert_f32_to_f16(src.data(), h.data(), n);
    convert_bf16_to_f32(b.data(), wb.data(), n);
    convert_f16_to_f32(h.data(), wh.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(b[i].bits, f32_to_bf16_bits(src[i])) << i;
      ASSERT_EQ(h[i].bits, f32_to_f16_bits(src[i])) << i;
      ASSERT_EQ(f32_bits(wb[i]), f32_bits(bf16_bits_to_f32(b[i].bits))) << i;
      ASSERT_EQ(f32_bits(wh[i]), f32_bits(f16_bits_to_f32(h[i].bits))) << i;
    }
  }
}

TEST(ConvertErrors, RejectsNullOverlapAndUnknownDtypes) {
  std::vector<float> f(8);
  std::vector<bfloat16> b(8);
  EXPECT_THROW(convert_f32_to_bf16(nullptr, b.data(), 8), ValueError);
  EXPECT_NO_THROW(convert_f32_to_bf16(nullptr, nullptr, 0));
  // f32 -> bf16 into the same bytes would read what it already overwrote on other threads.
  EXPECT_THROW(convert(f.data(), DType::f32, f.data(), DType::bf16, 8), ValueError);
  EXPECT_NO_THROW(convert(f.data(), DType::f32, f.data(), DType::f32, 8));  // same dtype: no-op
  EXPECT_THROW(convert(f.data(), static_cast<DType>(7), b.data(), DType::bf16, 8), DTypeError);
  try {
    convert(f.data(), DType::f32, f.data() + 1, DType::f16, 4);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("convert: src and dst overlap"), std::string::npos)
        << e.what();
  }
}

TEST(ConvertVerbose, LogsOneLinePerBulkCallWithTheKernel) {
  const bool was = verbose_enabled();
  set_verbose(true);
  std::vector<float> f(300000, 1.0f);  // several parallel chunks, still one line
  std::vector<bfloat16> b(f.size());
  std::vector<float16> h(f.size());
  ::testing::internal::CaptureStderr();
  convert_f32_to_bf16(f.data(), b.data(), f.size());
  convert(b.data(), DType::bf16, h.data(), DType::f16, b.size());
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_verbose(was);
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;
  EXPECT_NE(log.find("convert_f32_to_bf16 f32->bf16: ran "), std::string::npos) << log;
  EXPECT_NE(log.find("convert bf16->f16: ran "), std::string::npos) << log;
  if (max_isa() == Isa::avx512 && !cpu_features().avx512_bf16) {
    EXPECT_NE(log.find("ran avx512; skipped: avx512_bf16: CPU lacks avx512_bf16"),
              std::string::npos)
        << log;
  }
}

}  // namespace
}  // namespace mixprec
