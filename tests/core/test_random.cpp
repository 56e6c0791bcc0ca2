// Philox4x32-10 against the Random123 known-answer vectors, and the bulk generator against the
// scalar definition.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <vector>

#include "core/convert_test_util.h"
#include "mixprec/core/random.h"
#include "mixprec/kernels/random_arrays.h"

namespace mixprec {
namespace {

using test::convert_paths;
using test::ConvertPath;
using test::PathGuard;

// Random123 kat_vectors, "philox4x32 10": counter, key -> output.
constexpr Philox::Counter kZero = Philox::raw({0u, 0u, 0u, 0u}, {0u, 0u});
static_assert(kZero == Philox::Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});

TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox::raw({0u, 0u, 0u, 0u}, {0u, 0u}),
            (Philox::Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(Philox::raw({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                        {0xffffffffu, 0xffffffffu}),
            (Philox::Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(Philox::raw({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                        {0xa4093822u, 0x299f31d0u}),
            (Philox::Counter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, StreamLayout) {
  // block(seed, c) = raw({c lo, c hi, 0, 0}, {seed lo, seed hi});
  // element i = word i % 4 of block i / 4.
  const std::uint64_t seed = 0x0123456789abcdefull;
  const std::uint64_t counter = 0xfedcba9876543210ull;
  EXPECT_EQ(Philox::block(seed, counter),
            Philox::raw({0x76543210u, 0xfedcba98u, 0u, 0u}, {0x89abcdefu, 0x01234567u}));
  for (std::uint64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(random_bits(seed, i), Philox::block(seed, i / 4)[i % 4]);
  }
  EXPECT_NE(random_bits(1, 0), random_bits(2, 0));
}

// splitmix64 as a generator with state 1234567 (state += golden ratio, output = finaliser of
// the new state): the first outputs of Vigna's reference splitmix64.c.
TEST(SplitMix64, MatchesReferenceGenerator) {
  static_assert(splitmix64(0) == 0xE220A8397B1DCDAFull);
  constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  const std::uint64_t expected[] = {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull};
  for (std::uint64_t k = 0; k < 3; ++k) EXPECT_EQ(splitmix64(1234567 + k * kGolden), expected[k]) << k;
}

TEST(Philox, UniformIsInUnitIntervalWithMeanOneHalf) {
  double sum = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    const float u = uniform(99, static_cast<std::uint64_t>(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  // Standard error of the mean of U(0,1) is sqrt(1/12 / N) ~ 0.0009; allow 4 of them.
  EXPECT_NEAR(sum / kN, 0.5, 4 * 0.000913);
}

TEST(Philox, BulkFillMatchesScalarOnEveryPathAndThreadCount) {
  PathGuard guard;
  const std::uint64_t seed = 77;
  for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{6},
                                     std::uint64_t{0xffffffff} * 4 - 5}) {  // crosses 2^32 blocks
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{5},
                                std::size_t{9}, std::size_t{17}, std::size_t{33},
                                std::size_t{63}, std::size_t{65}, std::size_t{150001}}) {
      std::vector<std::uint32_t> want(n);
      for (std::size_t i = 0; i < n; ++i) want[i] = random_bits(seed, offset + i);
      for (const ConvertPath& path : convert_paths()) {
        if (path.ref) continue;  // fill_random_bits is no backend entry: it always runs the cpu
        for (int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << path.label << " threads=" << threads
                                            << " offset=" << offset << " n=" << n);
          guard.select(path);
          const int saved = omp_get_max_threads();
          omp_set_num_threads(threads);
          std::vector<std::uint32_t> got(n + 1, 0xabababab);
          fill_random_bits(seed, offset, got.data(), n);
          omp_set_num_threads(saved);
          for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "i=" << i;
          EXPECT_EQ(got[n], 0xababababu) << "wrote past the end";
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixprec
