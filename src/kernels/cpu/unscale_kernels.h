#pragma once
/// Hand-written AVX-512 unscale kernel (being replaced by the Highway version).
#include "kernels/unscale.h"

namespace mixprec::kernels {
// --- AVX-512F/DQ, bit-identical to unscale_f32_ref (same single correctly rounded multiply and
// the same verdict). Call only when max_isa() >= Isa::avx512 and inv is finite and non-zero. ---

/// out[i] = in[i] * inv over n f32 elements, 16 lanes (masked tail); true if any Inf/NaN; amax
/// exactly as the reference (a max is exact, so it is bit-identical too).
bool unscale_f32_avx512(const float* in, float* out, std::size_t n, float inv,
                        float* amax = nullptr) noexcept;

}  // namespace mixprec::kernels
