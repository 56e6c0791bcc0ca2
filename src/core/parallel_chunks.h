#pragma once
// Element-wise bulk work split across OpenMP threads in fixed chunks: what the conversion
// routines share. Every chunk is independent, so results cannot depend on the thread count.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace mixprec::detail {

/// Arrays above this many elements are split in chunks of this size.
inline constexpr std::size_t kConvertChunk = std::size_t{1} << 16;

/// Calls fn(begin, end) over [0, n): once when n is small, else per chunk in parallel.
template <class Fn>
void for_chunks(std::size_t n, const Fn& fn) {
  if (n <= kConvertChunk) {
    if (n > 0) fn(std::size_t{0}, n);
    return;
  }
  const auto chunks = static_cast<std::int64_t>((n + kConvertChunk - 1) / kConvertChunk);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kConvertChunk;
    fn(begin, std::min(n, begin + kConvertChunk));
  }
}

}  // namespace mixprec::detail
