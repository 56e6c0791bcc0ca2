#pragma once
/// What a token id carried by a float value is, for indices_from_values on every backend (the
/// reference's check and the CUDA kernel's): a whole number in [0, 2^24), the range in which
/// every integer is an f32 (so the cast to int64 is exact).
#include <cmath>

#include "kernels/spec/host_device.h"

namespace mixprec::kernels {

/// True if value is a whole number in [0, 2^24) (false for NaN).
MIXPREC_HD inline bool is_token_id(float value) {
  return value >= 0.0f && value < 16777216.0f && value == std::floor(value);
}

}  // namespace mixprec::kernels
