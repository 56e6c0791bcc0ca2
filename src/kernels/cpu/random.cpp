// cpu random kernels: the vector Philox of convert_simd.cpp (philox_fill), and uniform floats
// from it in fixed chunks (each element depends on its index only, so threads cannot change a
// value), narrowed to the dtype by the vector conversion.
#include <algorithm>

#include "kernels/convert.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/random.h"

namespace mixprec::kernels::cpu {

void random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n) {
  log_simd("random_bits", "u32");
  philox_fill(seed, offset, out, n);
}

void random_uniform(void* out, DType dtype, std::int64_t n, std::uint64_t seed,
                    std::uint64_t offset, float low, float high) {
  log_simd("random_uniform", name(dtype));
  constexpr std::int64_t kChunk = 4096;
  const float span = high - low;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, n >= kParallelMinWork, [&](std::int64_t c) {
    std::uint32_t bits[kChunk];
    float values[kChunk];
    const std::int64_t begin = c * kChunk;
    const auto m = static_cast<std::size_t>(std::min(kChunk, n - begin));
    philox_fill(seed, offset + static_cast<std::uint64_t>(begin), bits, m);
    // uniform() of random.h: the top 24 bits, exactly representable, scaled by 2^-24.
    for (std::size_t j = 0; j < m; ++j) {
      values[j] = low + span * (static_cast<float>(bits[j] >> 8) * 0x1p-24f);
    }
    convert(values, DType::f32, at(out, dtype, begin), dtype, m);
  });
}

}  // namespace mixprec::kernels::cpu
