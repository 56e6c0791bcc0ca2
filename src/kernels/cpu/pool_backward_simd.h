#pragma once
/// The Highway loop of max-pooling backward for 2x2 windows with stride 2 (the CNNs' case),
/// dispatched to the best target max_isa() allows (pool_backward_simd.cpp).
#include <cstdint>

#include "kernels/conv.h"

namespace mixprec::kernels::cpu::pool_simd {

/// dx of `planes` consecutive planes of a validated 2x2/stride-2/no-padding description: each
/// dy routed to its argmax, every other element +0 (the reference's bits: dx[argmax] =
/// T(0 + dy), so -0 becomes +0). dx is written exactly once, with no separate zero fill.
void max_pool_2x2_backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                           void* dx, std::int64_t planes);

}  // namespace mixprec::kernels::cpu::pool_simd
