#pragma once
/// Fused gradient unscale + non-finite check (GradScaler::unscale): one pass that multiplies each
/// gradient element by the inverse loss scale and reports whether any element was Inf or NaN.
/// Plain declarations only: unscale_kernels_avx512.cpp includes this header and must not see any
/// inline function a scalar file could also instantiate (ODR safety).
#include <cstddef>
#include <cstdint>

namespace mixprec::kernels {

/// Element type codes: the underlying values of mixprec::DType (checked by static_asserts in
/// unscale_kernels.cpp; this header may not include dtype.h).
enum UnscaleDType : int { kUnscaleF32 = 0, kUnscaleBF16 = 1, kUnscaleF16 = 2 };

// --- Scalar reference (unscale_ref.cpp): the specification. `in` may equal `out`. ---

/// out[i] = in[i] * inv (one f32 rounding) for n f32 elements; true if any in[i] or out[i] is
/// Inf or NaN (an overflowing product counts, so does an Inf/NaN input).
bool unscale_f32_ref(const float* in, float* out, std::size_t n, float inv) noexcept;
/// The same for n bf16 (dtype kUnscaleBF16) or f16 (kUnscaleF16) bit patterns: out[i] is
/// widen(in[i]) * inv in f32, rounded to nearest even to the dtype; true if any widened input or
/// rounded output is Inf or NaN (so a product above the dtype's max counts as an overflow).
bool unscale_16bit_ref(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv,
                       int dtype) noexcept;

// --- AVX-512F/DQ, bit-identical to unscale_f32_ref (same single correctly rounded multiply and
// the same verdict). Call only when max_isa() >= Isa::avx512 and inv is finite and non-zero. ---

/// out[i] = in[i] * inv over n f32 elements, 16 lanes (masked tail); true if any Inf/NaN.
bool unscale_f32_avx512(const float* in, float* out, std::size_t n, float inv) noexcept;

// --- Dispatch (unscale_kernels.cpp): ISA choice, OpenMP above a size threshold, verbose log. ---

/// Multiplies n contiguous elements of dtype code `dtype` in place by inv (finite, non-zero);
/// returns whether any element was Inf/NaN before or after. f32 runs the AVX-512 kernel when
/// allowed; bf16/f16 run the reference. The verdict never depends on the ISA or thread count.
bool unscale_inplace(void* data, int dtype, std::size_t n, float inv);

}  // namespace mixprec::kernels
