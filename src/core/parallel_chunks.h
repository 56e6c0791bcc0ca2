#pragma once
// Bulk work split across OpenMP threads in fixed chunks: what the kernels, the conversions and
// the optimizer-side loops share. Every chunk is independent, so results cannot depend on the thread count.
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

namespace mixprec {

/// Work (in elements) below which kernels stay on one thread: a parallel region costs a few
/// microseconds, about what 32K elements of a cheap op cost on one core.
inline constexpr std::int64_t kParallelMinWork = 32768;

/// Calls body(i) for i in [0, count), across OpenMP threads when `parallel` (static schedule:
/// each i runs on one thread, so per-i results never depend on the thread count). body must
/// not throw.
template <class Body>
void parallel_for(std::int64_t count, bool parallel, Body&& body) {
  if (!parallel || count < 2) {
    for (std::int64_t i = 0; i < count; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) body(i);
}

/// Calls body(begin, length) over [0, n) in chunks of `chunk` elements, in parallel once n
/// reaches kParallelMinWork.
template <class Body>
void parallel_chunks(std::int64_t n, std::int64_t chunk, Body&& body) {
  if (n < kParallelMinWork) {
    if (n > 0) body(std::int64_t{0}, n);
    return;
  }
  const std::int64_t count = (n + chunk - 1) / chunk;
  parallel_for(count, true, [&](std::int64_t c) {
    const std::int64_t begin = c * chunk;
    body(begin, std::min(chunk, n - begin));
  });
}

}  // namespace mixprec
