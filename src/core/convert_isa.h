#pragma once
/// Entry points of the ISA-specific conversion kernels (convert_avx512.cpp,
/// convert_avx512bf16.cpp).
/// Plain declarations only: those files are compiled with AVX-512 flags and must not see any
/// inline function the scalar code could also instantiate. Call an entry point only after
/// checking mixprec::max_isa(). 16-bit elements travel as raw uint16_t bit patterns.
#include <cstddef>
#include <cstdint>

namespace mixprec::detail {

// --- AVX-512F (+BW/VL/DQ, F16C); bit-identical to the scalar functions of half.h. ---

/// f32 -> bf16 round-to-nearest-even by integer arithmetic (the half.h bit trick, 16 lanes).
void f32_to_bf16_avx512(const float* src, std::uint16_t* dst, std::size_t n) noexcept;
/// bf16 -> f32 by widening and shifting.
void bf16_to_f32_avx512(const std::uint16_t* src, float* dst, std::size_t n) noexcept;
/// f32 -> f16 with vcvtps2ph (round to nearest even, exceptions suppressed).
void f32_to_f16_avx512(const float* src, std::uint16_t* dst, std::size_t n) noexcept;
/// f16 -> f32 with vcvtph2ps.
void f16_to_f32_avx512(const std::uint16_t* src, float* dst, std::size_t n) noexcept;
/// out[i] = random_bits(seed, offset + i) (random.h); requires offset % 4 == 0.
void philox_bits_avx512(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out,
                        std::size_t n) noexcept;
/// Stochastic f32 -> bf16 with random_bits(seed, offset + i); requires offset % 4 == 0.
void f32_to_bf16_stochastic_avx512(const float* src, std::uint16_t* dst, std::size_t n,
                                   std::uint64_t seed, std::uint64_t offset) noexcept;
/// Stochastic f32 -> f16 with random_bits(seed, offset + i); requires offset % 4 == 0.
void f32_to_f16_stochastic_avx512(const float* src, std::uint16_t* dst, std::size_t n,
                                  std::uint64_t seed, std::uint64_t offset) noexcept;

// --- AVX512-BF16 ---

/// f32 -> bf16 with vcvtne2ps2bf16, plus a fix-up of fp32 denormal inputs (the instruction
/// flushes them to zero; the reference rounds them like any other value).
void f32_to_bf16_avx512bf16(const float* src, std::uint16_t* dst, std::size_t n) noexcept;

}  // namespace mixprec::detail
