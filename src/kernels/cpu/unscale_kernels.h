#pragma once
/// The Highway kernels of the fused gradient unscale (unscale_simd.cpp), called by the dispatcher
/// (unscale_kernels.cpp) once per chunk on one thread. Private to src/kernels/cpu.
#include <cstddef>
#include <cstdint>

#include "kernels/unscale.h"

namespace mixprec::kernels::cpu {

// Bit-identical to unscale_f32_ref / unscale_16bit_ref (outputs, verdict and amax) on every
// Highway target (the best one allowed by max_isa() runs), for a finite non-zero inv and an amax
// that is null or points to a non-negative number. `in` may equal `out`.

/// out[i] = in[i] * inv over n f32 elements; true if any is Inf/NaN; raises *amax.
bool unscale_f32_simd(const float* in, float* out, std::size_t n, float inv, float* amax);
/// The same for n bf16 (DType::bf16) or f16 (DType::f16) bit patterns.
bool unscale_16bit_simd(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv,
                        DType dtype, float* amax);

}  // namespace mixprec::kernels::cpu
