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

#include "core/convert_reference.h"
#include "core/convert_test_util.h"
#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/verbose.h"

namespace mixprec {
namespace {

using namespace test;  // references, sample patterns and ISA helpers

TEST(ConvertReference, IntegerAndDoubleReferencesAgree) {
  const std::vector<std::uint32_t> patterns = sample_patterns();
  for (const Format* f : {&kBf16, &kF16}) {
    for (std::uint32_t b : patterns) {
      ASSERT_EQ(reference_round(b, *f), reference_round_double(b, *f)) << hex(b);
    }
  }
}

TEST(ConvertReference, AgreesWithHandPickedValues) {
  // Guards the guard: if the references were wrong, the sweep would prove nothing.
  for (auto* round : {&reference_round, &reference_round_double}) {
    EXPECT_EQ(round(f32_bits(1.0f), kF16), 0x3c00);
    EXPECT_EQ(round(f32_bits(65504.0f), kF16), 0x7bff);
    EXPECT_EQ(round(f32_bits(65520.0f), kF16), 0x7c00);
    EXPECT_EQ(round(f32_bits(0x1p-24f), kF16), 0x0001);
    EXPECT_EQ(round(f32_bits(-0x1.8p-24f), kF16), 0x8002);
    EXPECT_EQ(round(f32_bits(0x1p-25f), kF16), 0x0000);
    EXPECT_EQ(round(f32_bits(1.0f), kBf16), 0x3f80);
    EXPECT_EQ(round(0x00018000u, kBf16), 0x0002);
    EXPECT_EQ(round(0x7f7f8000u, kBf16), 0x7f80);
    EXPECT_EQ(round(0x7f800001u, kBf16), 0x7fc0);
  }
  EXPECT_EQ(reference_decode(0x7bff, kF16), 65504.0);
  EXPECT_EQ(reference_decode(0x0001, kF16), std::ldexp(1.0, -24));
  EXPECT_EQ(reference_decode(0x7f7f, kBf16), traits(DType::bf16).max);
}

// ---------------------------------------------------------------------------------------------
// (1) Every 16-bit pattern: exact widening, and 16 -> 32 -> 16 gives the pattern back.

template <class T>
void check_all_16bit_patterns(const Format& fmt, std::uint16_t quiet_bit) {
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
  PathGuard guard;
  for (const ConvertPath& path : convert_paths()) {
    SCOPED_TRACE(path.label);
    guard.select(path);
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
// (2) Every fp32 pattern (a sample under sanitizers) against the independent reference: the
// scalar functions of half.h, and the bulk conversions of the ref backend and of the cpu
// backend at the best Highway target of this CPU. The lower targets (e.g. SSE4 and SCALAR on
// an AVX2 machine) get every 7th pattern plus every boundary of sample_patterns(), against the
// scalar functions: a full sweep per target costs ~15 s of CPU on the slowest (one-lane SCALAR)
// and would push the conversion tests far past 90 s on a 2-core machine. Every target runs the
// same source, and the boundaries are where a target-specific op could differ.

struct SweepState {
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  std::string first;
};

/// Inputs and bulk outputs of one batch, reused from batch to batch: element i of a batch of
/// n magnitudes is the positive pattern, element n + i the same pattern negated.
struct SweepBuffers {
  std::vector<ConvertPath> paths = {convert_paths().front(), convert_paths().back()};
  std::vector<float> src;
  std::vector<std::vector<bfloat16>> to_bf16;
  std::vector<std::vector<float16>> to_f16;
  explicit SweepBuffers(std::size_t n)
      : src(2 * n), to_bf16(paths.size(), std::vector<bfloat16>(2 * n)),
        to_f16(paths.size(), std::vector<float16>(2 * n)) {}
};

/// Checks the fp32 patterns m and m | sign for each magnitude pattern m in [0, n). The
/// reference takes the sign bit straight through, so it is computed once per magnitude.
void check_magnitudes(const std::uint32_t* magnitudes, std::size_t n, SweepBuffers& buffers,
                      SweepState& state) {
  const std::vector<ConvertPath>& paths = buffers.paths;
  float* src = buffers.src.data();
#pragma omp parallel for schedule(static)
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(n); ++k) {
    const auto i = static_cast<std::size_t>(k);
    src[i] = f32_from(magnitudes[i] & 0x7fffffffu);
    src[n + i] = f32_from(magnitudes[i] | 0x80000000u);
  }
  {
    PathGuard guard;
    for (std::size_t c = 0; c < paths.size(); ++c) {
      guard.select(paths[c]);
      // Slices on all threads: the ref backend itself runs on one.
      constexpr std::int64_t kSlice = std::int64_t{1} << 16;
      const auto slices = static_cast<std::int64_t>((2 * n + kSlice - 1) / kSlice);
      bfloat16* to_bf16 = buffers.to_bf16[c].data();
      float16* to_f16 = buffers.to_f16[c].data();
#pragma omp parallel for schedule(static)
      for (std::int64_t k = 0; k < slices; ++k) {
        const auto begin = static_cast<std::size_t>(k * kSlice);
        const std::size_t count = std::min<std::size_t>(kSlice, 2 * n - begin);
        convert_f32_to_bf16(src + begin, to_bf16 + begin, count);
        convert_f32_to_f16(src + begin, to_f16 + begin, count);
      }
    }
  }
  // Plain local pointers, so the hot loop does not reload them through the vectors.
  constexpr std::size_t kMaxPaths = 2;  // the best cpu target, ref
  ASSERT_LE(paths.size(), kMaxPaths);
  const std::size_t num_paths = paths.size();
  const float* x = src;
  const bfloat16* bulk_bf16[kMaxPaths] = {};
  const float16* bulk_f16[kMaxPaths] = {};
  for (std::size_t c = 0; c < num_paths; ++c) {
    bulk_bf16[c] = buffers.to_bf16[c].data();
    bulk_f16[c] = buffers.to_f16[c].data();
  }
  // Bit 0/1: scalar bf16/f16 wrong; bits 2c+2 / 2c+3: bulk bf16/f16 on paths[c] wrong.
  const auto failures = [=](std::size_t j, std::uint16_t want_bf16, std::uint16_t want_f16) {
    unsigned failed = (f32_to_bf16_bits(x[j]) != want_bf16 ? 1u : 0u) |
                      (f32_to_f16_bits(x[j]) != want_f16 ? 2u : 0u);
    for (std::size_t c = 0; c < num_paths; ++c) {
      failed |= (bulk_bf16[c][j].bits != want_bf16 ? 4u : 0u) << (2 * c);
      failed |= (bulk_f16[c][j].bits != want_f16 ? 8u : 0u) << (2 * c);
    }
    return failed;
  };
  const auto report = [&](std::size_t j, std::uint16_t want_bf16, std::uint16_t want_f16,
                          unsigned failed) {
    std::string what;
    if (failed & 1u) what += " scalar-bf16";
    if (failed & 2u) what += " scalar-f16";
    for (std::size_t c = 0; c < paths.size(); ++c) {
      if (failed & (4u << (2 * c))) what += " bulk-bf16@" + paths[c].label;
      if (failed & (8u << (2 * c))) what += " bulk-f16@" + paths[c].label;
    }
    return hex(f32_bits(src[j])) + " (want bf16 " + hex(want_bf16) + ", f16 " + hex(want_f16) +
           "):" + what;
  };
  std::uint64_t bad = 0;
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) reduction(+ : bad)
  for (std::int64_t k = 0; k < count; ++k) {
    const auto i = static_cast<std::size_t>(k);
    const std::uint16_t want_bf16 = reference_round(magnitudes[i] & 0x7fffffffu, kBf16);
    const std::uint16_t want_f16 = reference_round(magnitudes[i] & 0x7fffffffu, kF16);
    const unsigned pos = failures(i, want_bf16, want_f16);
    const unsigned neg = failures(n + i, want_bf16 | 0x8000, want_f16 | 0x8000);
    if ((pos | neg) != 0) [[unlikely]] {
      bad += (pos != 0) + (neg != 0);
#pragma omp critical(convert_sweep_first)
      if (state.first.empty()) {
        state.first = pos != 0 ? report(i, want_bf16, want_f16, pos)
                               : report(n + i, want_bf16 | 0x8000, want_f16 | 0x8000, neg);
      }
    }
  }
  state.mismatches += bad;
  state.checked += 2 * n;
}

TEST(ConvertExhaustive, EveryF32PatternMatchesReferenceOnBestTargetAndRef) {
  SweepState state;
  constexpr std::size_t kBatch = std::size_t{1} << 21;  // few, large parallel regions
  SweepBuffers buffers(kBatch);
#ifdef MIXPREC_SANITIZER_BUILD
  const std::vector<std::uint32_t> sample = sample_patterns();  // both signs: checked twice
  for (std::size_t i = 0; i < sample.size(); i += kBatch) {
    check_magnitudes(sample.data() + i, std::min(kBatch, sample.size() - i), buffers, state);
  }
  EXPECT_GT(state.checked, 2000000u);
#else
  std::vector<std::uint32_t> batch(kBatch);
  for (std::uint64_t start = 0; start < (std::uint64_t{1} << 31); start += kBatch) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(kBatch); ++i) {
      batch[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(start + std::uint64_t(i));
    }
    check_magnitudes(batch.data(), kBatch, buffers, state);
  }
  EXPECT_EQ(state.checked, std::uint64_t{1} << 32);
#endif
  EXPECT_EQ(state.mismatches, 0u) << "first mismatch: " << state.first;
}

/// Converts `patterns` on each path in `paths` and expects the scalar functions' bits.
void check_against_scalar(const std::vector<std::uint32_t>& patterns,
                          const std::vector<ConvertPath>& paths) {
  const std::size_t n = patterns.size();
  const auto* src = reinterpret_cast<const float*>(patterns.data());
  std::vector<std::uint16_t> want_bf16(n), want_f16(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(n); ++k) {
    const auto i = static_cast<std::size_t>(k);
    want_bf16[i] = f32_to_bf16_bits(src[i]);
    want_f16[i] = f32_to_f16_bits(src[i]);
  }
  PathGuard guard;
  std::vector<bfloat16> to_bf16(n);
  std::vector<float16> to_f16(n);
  for (const ConvertPath& path : paths) {
    guard.select(path);
    convert_f32_to_bf16(src, to_bf16.data(), n);
    convert_f32_to_f16(src, to_f16.data(), n);
    std::uint64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(n); ++k) {
      const auto i = static_cast<std::size_t>(k);
      bad += (to_bf16[i].bits != want_bf16[i]) + (to_f16[i].bits != want_f16[i]);
    }
    if (bad == 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(to_bf16[i].bits, want_bf16[i]) << path.label << " bf16 of " << hex(patterns[i]);
      ASSERT_EQ(to_f16[i].bits, want_f16[i]) << path.label << " f16 of " << hex(patterns[i]);
    }
  }
}

TEST(ConvertExhaustive, LowerTargetsMatchScalarOnEvery7thPatternAndEveryBoundary) {
  std::vector<ConvertPath> lower = convert_paths();
  lower.erase(lower.begin());  // the best target: swept in full above
  lower.pop_back();            // ref: swept in full above
  if (lower.empty()) GTEST_SKIP() << "this CPU runs a single Highway target";
  check_against_scalar(sample_patterns(), lower);  // both signs of every boundary
#ifndef MIXPREC_SANITIZER_BUILD
  constexpr std::uint64_t kBatch = std::uint64_t{1} << 22;
  std::vector<std::uint32_t> batch;
  for (std::uint64_t start = 0; start < (std::uint64_t{1} << 32); start += 7 * kBatch) {
    batch.clear();
    for (std::uint64_t b = start; b < std::min(start + 7 * kBatch, std::uint64_t{1} << 32); b += 7) {
      batch.push_back(static_cast<std::uint32_t>(b));
    }
    check_against_scalar(batch, lower);
    if (HasFatalFailure()) return;
  }
#endif
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
  PathGuard guard;
  std::vector<float> src;
  for (const Edge& e : edges) src.push_back(f32_from(e.in));
  for (const ConvertPath& path : convert_paths()) {
    guard.select(path);
    std::vector<T> dst(src.size());
    convert(src.data(), DType::f32, dst.data(), dtype_of<T>, src.size());
    for (std::size_t i = 0; i < edges.size(); ++i) {
      EXPECT_EQ(dst[i].bits, edges[i].out) << edges[i].what << " on " << path.label;
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

constexpr DType kEveryDType[] = {DType::f32, DType::bf16, DType::f16, DType::f8e4m3,
                                  DType::f8e5m2};

/// The value of bit pattern b of dtype t, widened exactly by the scalar functions.
float widen_bits(std::uint32_t b, DType t) {
  switch (t) {
    case DType::f32: return f32_from(b);
    case DType::bf16: return bf16_bits_to_f32(static_cast<std::uint16_t>(b));
    case DType::f16: return f16_bits_to_f32(static_cast<std::uint16_t>(b));
    case DType::f8e4m3: return e4m3_bits_to_f32(static_cast<std::uint8_t>(b));
    case DType::f8e5m2: return e5m2_bits_to_f32(static_cast<std::uint8_t>(b));
  }
  return 0.0f;
}

/// x rounded to dtype t by the scalar functions, as a bit pattern.
std::uint32_t narrow_bits(float x, DType t) {
  switch (t) {
    case DType::f32: return f32_bits(x);
    case DType::bf16: return f32_to_bf16_bits(x);
    case DType::f16: return f32_to_f16_bits(x);
    case DType::f8e4m3: return f32_to_e4m3_bits(x);
    case DType::f8e5m2: return f32_to_e5m2_bits(x);
  }
  return 0;
}

/// Element i of a byte buffer of dtype t, as a bit pattern.
std::uint32_t element_bits(const std::vector<std::uint8_t>& bytes, DType t, std::size_t i) {
  std::uint32_t b = 0;
  std::memcpy(&b, bytes.data() + i * size_of(t), size_of(t));
  return b;
}

// Lengths around every vector width (1, 4, 8, 16 f32 lanes, and SVE's), past one parallel chunk
// (65536) and a large ragged one; the buffers start one element past an allocation, so loads
// and stores are unaligned, and a sentinel element after the end must survive.
TEST(ConvertBulk, EveryPairOnEveryPathMatchesScalarForOddLengths) {
  PathGuard guard;
  for (std::size_t n : {0u, 1u, 2u, 3u, 5u, 7u, 9u, 15u, 17u, 31u, 33u, 65u, 65537u, 1000003u}) {
    const auto raw = random_f32_patterns(n + 1, static_cast<std::uint32_t>(n));
    for (const ConvertPath& path : convert_paths()) {
      guard.select(path);
      for (DType from : kEveryDType) {
        // Source patterns: raw f32 bits, or bits 7.. of them for the narrower dtypes.
        std::vector<std::uint8_t> src((n + 1) * size_of(from));
        for (std::size_t i = 0; i <= n; ++i) {
          const std::uint32_t b = from == DType::f32 ? raw[i] : raw[i] >> 7;
          std::memcpy(src.data() + i * size_of(from), &b, size_of(from));
        }
        for (DType to : kEveryDType) {
          SCOPED_TRACE(::testing::Message() << "n=" << n << " " << path.label << " " << name(from)
                                            << "->" << name(to));
          std::vector<std::uint8_t> dst((n + 2) * size_of(to), 0xa5);
          convert(src.data() + size_of(from), from, dst.data() + size_of(to), to, n);
          for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t in = element_bits(src, from, i + 1);
            const std::uint32_t want = from == to ? in : narrow_bits(widen_bits(in, from), to);
            ASSERT_EQ(element_bits(dst, to, i + 1), want) << "i=" << i << " input " << hex(in);
          }
          const std::uint32_t untouched = element_bits(std::vector<std::uint8_t>(4, 0xa5), to, 0);
          EXPECT_EQ(element_bits(dst, to, 0), untouched) << "wrote before the start";
          EXPECT_EQ(element_bits(dst, to, n + 1), untouched) << "wrote past the end";
        }
      }
    }
  }
}

TEST(ConvertBulk, TypedEntryPointsMatchScalar) {
  PathGuard guard;
  const std::size_t n = 4099;
  const std::vector<std::uint32_t> raw = random_f32_patterns(n, 7);
  std::vector<float> src(n);
  std::memcpy(src.data(), raw.data(), n * 4);
  for (const ConvertPath& path : convert_paths()) {
    SCOPED_TRACE(path.label);
    guard.select(path);
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

TEST(ConvertBulk, SameDtypeIsACopyEvenWhenRangesOverlap) {
  PathGuard guard;
  for (const ConvertPath& path : convert_paths()) {
    SCOPED_TRACE(path.label);
    guard.select(path);
    std::vector<std::uint16_t> v{1, 2, 3, 4, 5, 0x7c01};  // a signalling f16 NaN stays as is
    convert(v.data(), DType::f16, v.data() + 1, DType::f16, 5);
    EXPECT_EQ(v, (std::vector<std::uint16_t>{1, 1, 2, 3, 4, 5}));
    v = {1, 2, 3, 0x7c01, 5, 6};
    convert(v.data() + 1, DType::f16, v.data(), DType::f16, 5);
    EXPECT_EQ(v, (std::vector<std::uint16_t>{2, 3, 0x7c01, 5, 6, 6}));
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

/// What MIXPREC_VERBOSE prints for the calls of `body`.
template <class Body>
std::string verbose_lines(Body body) {
  const bool was = verbose_enabled();
  set_verbose(true);
  ::testing::internal::CaptureStderr();
  body();
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_verbose(was);
  return log;
}

TEST(ConvertVerbose, NamesTheHighwayTargetOncePerCallOnEveryPath) {
  PathGuard guard;
  std::vector<float> f(300000, 1.0f);  // several parallel chunks, still one line per call
  std::vector<bfloat16> b(f.size());
  std::vector<float16> h(f.size());
  std::vector<std::uint8_t> e4(f.size());
  for (const ConvertPath& path : convert_paths()) {
    SCOPED_TRACE(path.label);
    guard.select(path);
    const std::string log = verbose_lines([&] {
      convert_f32_to_bf16(f.data(), b.data(), f.size());
      convert(b.data(), DType::bf16, h.data(), DType::f16, b.size());
      convert(h.data(), DType::f16, e4.data(), DType::f8e4m3, h.size());
      convert_f32_to_f16_stochastic(f.data(), h.data(), f.size(), 1, 0);
    });
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4) << log;
    if (path.ref) {
      // The ref backend logs each call once, at the backend boundary.
      EXPECT_NE(log.find("convert -: ran ref; skipped: MIXPREC_BACKEND=ref"), std::string::npos)
          << log;
      EXPECT_NE(log.find("convert_stochastic -: ran ref"), std::string::npos) << log;
    } else {
      const std::string ran = std::string(": ran ") + simd_target();
      EXPECT_NE(log.find("convert f32->bf16" + ran), std::string::npos) << log;
      EXPECT_NE(log.find("convert bf16->f16" + ran), std::string::npos) << log;
      EXPECT_NE(log.find("convert f16->f8e4m3" + ran), std::string::npos) << log;
      EXPECT_NE(log.find("convert_stochastic f32->f16" + ran), std::string::npos) << log;
      // Below the best target, the line says why the faster code did not run.
      if (path.label != convert_paths().front().label) {
        EXPECT_NE(log.find("; skipped: capped at "), std::string::npos) << log;
      }
    }
  }
  // Same dtype: a vector copy, or memmove when the ranges overlap.
  guard.select(convert_paths().front());
  std::vector<float> g(f.size());
  const std::string copy_log = verbose_lines([&] {
    convert(f.data(), DType::f32, g.data(), DType::f32, f.size());
    convert(f.data(), DType::f32, f.data() + 1, DType::f32, 8);
  });
  EXPECT_NE(copy_log.find("convert f32: ran " + std::string(simd_target())), std::string::npos)
      << copy_log;
  EXPECT_NE(copy_log.find("convert f32: ran memmove; skipped: ranges overlap"), std::string::npos)
      << copy_log;
  EXPECT_EQ(g, f);
}

}  // namespace
}  // namespace mixprec
