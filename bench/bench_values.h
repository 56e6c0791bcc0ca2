#pragma once
// Deterministic benchmark inputs: the same values in every benchmark binary and on every run.
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/core/half.h"

namespace mixprec::bench {

/// n pseudo-random values in [lo, hi) (a linear congruential stream from seed) stored as dtype t
/// (f32, bf16 or f16), as raw bytes.
inline std::vector<std::uint8_t> values(DType t, std::int64_t n, float lo, float hi,
                                        std::uint32_t seed) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(n) * size_of(t));
  std::uint32_t x = seed * 2654435761u + 1u;
  for (std::int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = lo + (hi - lo) * (static_cast<float>(x >> 8) / 16777216.0f);
    if (t == DType::f32) {
      std::memcpy(v.data() + 4 * i, &f, 4);
    } else {
      const std::uint16_t b = t == DType::bf16 ? f32_to_bf16_bits(f) : f32_to_f16_bits(f);
      std::memcpy(v.data() + 2 * i, &b, 2);
    }
  }
  return v;
}

}  // namespace mixprec::bench
