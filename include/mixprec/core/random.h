#pragma once
/// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): element i of a stream
/// is a pure function of (seed, i), so results never depend on threads, chunking or call order.
/// fill_random_bits (mixprec/kernels/random_arrays.h) draws a stream in bulk on the backend.
#include <array>
#include <cstddef>
#include <cstdint>

namespace mixprec {

/// Philox4x32 with 10 rounds: a keyed bijection on 128-bit counters.
struct Philox {
  using Counter = std::array<std::uint32_t, 4>;
  using Key = std::array<std::uint32_t, 2>;

  /// The raw Philox4x32-10 function of Random123 (matches its known-answer vectors).
  static constexpr Counter raw(Counter ctr, Key key) noexcept {
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {  // the key is bumped between rounds, not before the first
        key[0] += 0x9E3779B9u;
        key[1] += 0xBB67AE85u;
      }
      const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * ctr[0];
      const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * ctr[2];
      ctr = Counter{static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0],
                    static_cast<std::uint32_t>(p1),
                    static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1],
                    static_cast<std::uint32_t>(p0)};
    }
    return ctr;
  }

  /// 128 random bits for block `counter` of stream `seed`: key = seed (low word first),
  /// counter words = {counter low, counter high, 0, 0}.
  static constexpr Counter block(std::uint64_t seed, std::uint64_t counter) noexcept {
    const Counter ctr{static_cast<std::uint32_t>(counter),
                      static_cast<std::uint32_t>(counter >> 32), 0u, 0u};
    return raw(ctr, Key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  }
};

/// 32 random bits for element `index` of stream `seed`: word index%4 of block index/4.
constexpr std::uint32_t random_bits(std::uint64_t seed, std::uint64_t index) noexcept {
  return Philox::block(seed, index / 4)[index % 4];
}

/// A uniform float in [0, 1) for element `index` of stream `seed` (24 random bits, exact).
constexpr float uniform(std::uint64_t seed, std::uint64_t index) noexcept {
  return static_cast<float>(random_bits(seed, index) >> 8) * 0x1p-24f;
}

/// The splitmix64 finaliser (Steele, Lea and Flood, OOPSLA'14; the seeding function of the
/// xoshiro generators): a bijection on 64-bit words whose outputs for consecutive inputs look
/// independent. Chosen where a stream must be replayed by a few lines of Python (a PyTorch peer),
/// which Philox would make long. splitmix64(0) == 0xE220A8397B1DCDAF.
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace mixprec
