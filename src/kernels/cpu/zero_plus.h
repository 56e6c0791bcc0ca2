#pragma once
/// The value a max-pooling backward writes where one window's gradient lands, shared by the
/// NCHW scatter (pool.cpp) and the channels-last one (pool_channels_last.cpp).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "mixprec/core/half.h"

namespace mixprec::kernels::cpu {

// The reference's value of one gradient element: the f32 sum 0 + dy (which turns -0 into +0 and
// quiets a NaN), rounded to T. For a 16-bit T every other value comes back as its own bits, so
// only -0 and the top exponent (Inf, NaN) take the conversion round trip.
template <class T>
T zero_plus(T dy) {
  if constexpr (sizeof(T) == 2) {
    std::uint16_t bits;
    std::memcpy(&bits, &dy, sizeof bits);
    constexpr std::uint16_t kTopExponent = std::is_same_v<T, bfloat16> ? 0x7f80u : 0x7c00u;
    if ((bits & 0x7fffu) != 0 && (bits & kTopExponent) != kTopExponent) return dy;
  }
  return T(0.0f + static_cast<float>(dy));
}

}  // namespace mixprec::kernels::cpu
