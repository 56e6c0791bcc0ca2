#include "mixprec/core/random.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/convert_isa.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"

namespace mixprec {
namespace {

// Threads split large fills in chunks of this many elements (a multiple of 4 keeps every
// chunk but the first on a Philox block boundary).
constexpr std::size_t kChunk = std::size_t{1} << 16;

// One Philox block serves four consecutive elements, so the scalar loop computes each once.
void fill_scalar(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n) {
  std::size_t i = 0;
  while (i < n) {
    const std::uint64_t index = offset + i;
    const Philox::Counter block = Philox::block(seed, index / 4);
    for (std::size_t word = index % 4; word < 4 && i < n; ++word, ++i) out[i] = block[word];
  }
}

void fill_serial(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n,
                 bool vector) {
  if (!vector) {
    fill_scalar(seed, offset, out, n);
    return;
  }
  // The vector kernel starts on a block boundary; the (at most 3) elements before it are scalar.
  const std::size_t head = std::min<std::size_t>(n, (4 - offset % 4) % 4);
  fill_scalar(seed, offset, out, head);
  detail::philox_bits_avx512(seed, offset + head, out + head, n - head);
}

}  // namespace

void fill_random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out,
                      std::size_t n) {
  MIXPREC_CHECK(n == 0 || out != nullptr, ValueError, "fill_random_bits",
                "out is null with n = " << n << "; pass a buffer of n uint32_t");
  MIXPREC_CHECK(n <= std::numeric_limits<std::uint64_t>::max() - offset, ValueError,
                "fill_random_bits",
                "offset " << offset << " + n " << n << " overflows the 64-bit element counter; "
                          << "use a new seed instead of a huge offset");
  const bool vector = isa_allowed(Isa::avx512);
  if (n <= kChunk) {
    fill_serial(seed, offset, out, n, vector);
    return;
  }
  const auto chunks = static_cast<std::int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    const std::size_t count = std::min(kChunk, n - begin);
    fill_serial(seed, offset + begin, out + begin, count, vector);
  }
}

}  // namespace mixprec
