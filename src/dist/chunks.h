#pragma once
// How a deterministic all-reduce splits n elements over p ranks: rank k owns one contiguous
// chunk and sums it for everyone. Pure arithmetic, so that it is unit-tested without MPI.
#include <cstddef>

namespace mixprec::dist::detail {

/// A contiguous range [begin, begin + count) of a buffer.
struct Chunk {
  std::size_t begin = 0;
  std::size_t count = 0;
};

/// Rank k's chunk of n elements split over p >= 1 ranks: the first n % p chunks are one element
/// longer, so the chunks tile [0, n) in rank order and differ in size by at most one.
inline Chunk chunk_of(std::size_t n, int p, int k) {
  const std::size_t parts = static_cast<std::size_t>(p);
  const std::size_t idx = static_cast<std::size_t>(k);
  const std::size_t base = n / parts;
  const std::size_t extra = n % parts;
  const std::size_t begin = idx * base + (idx < extra ? idx : extra);
  return {begin, base + (idx < extra ? 1 : 0)};
}

}  // namespace mixprec::dist::detail
