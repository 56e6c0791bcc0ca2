#pragma once
/// Bulk dtype conversions. Each call checks its arguments and runs the active backend's kernel
/// (kernels/convert.h): on the cpu backend one Highway source vectorised for every SIMD target
/// and threaded over large arrays, on the ref backend the scalar loops. Every backend and
/// target is bit-identical to the scalar conversions of half.h and float8.h, the reference.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "mixprec/core/half.h"

namespace mixprec {

/// f32 -> bf16, round to nearest even; NaN stays NaN (quiet), overflow becomes Inf.
void convert_f32_to_bf16(const float* src, bfloat16* dst, std::size_t n);
/// bf16 -> f32, exact.
void convert_bf16_to_f32(const bfloat16* src, float* dst, std::size_t n);
/// f32 -> f16, round to nearest even; NaN stays NaN (quiet), |x| >= 65520 becomes Inf.
void convert_f32_to_f16(const float* src, float16* dst, std::size_t n);
/// f16 -> f32, exact.
void convert_f16_to_f32(const float16* src, float* dst, std::size_t n);
/// Any dtype to any dtype over n contiguous elements; 16-bit to 16-bit goes through f32. Pairs
/// with an fp8 side use convert_fp8.h (exact widening, then one rounding to nearest even).
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n);

/// f32 -> bf16 with stochastic rounding: rounds up with probability equal to the dropped fraction,
/// so the result is unbiased. Element i draws its random bits from counter (seed, offset + i), so
/// results do not depend on threading or on how the array is split. NaN/Inf behave as in RNE.
/// Element i uses random_bits(seed, offset + i) of random.h; throws ValueError if offset + n
/// overflows 64 bits, or if src and dst overlap.
void convert_f32_to_bf16_stochastic(const float* src, bfloat16* dst, std::size_t n,
                                    std::uint64_t seed, std::uint64_t offset = 0);
/// f32 -> f16 with stochastic rounding (same contract as the bf16 version; subnormals included).
void convert_f32_to_f16_stochastic(const float* src, float16* dst, std::size_t n,
                                   std::uint64_t seed, std::uint64_t offset = 0);

/// Scalar stochastic rounding of one value with 32 caller-supplied random bits.
/// With f the fraction of the bf16 spacing dropped by truncation toward zero, the magnitude
/// rounds up iff random_bits >= 2^32 - f * 2^32, so P(up) = f exactly (f has 16 bits): the result
/// is the f32 pattern plus random_bits >> 16, truncated. NaN -> quiet NaN as in RNE; Inf stays
/// Inf; a finite value above bf16 max rounds up to Inf with probability
/// (|x| - max) / (2^128 - max), i.e. Inf counts as the next value 2^128.
std::uint16_t f32_to_bf16_bits_stochastic(float value, std::uint32_t random_bits) noexcept;
/// Scalar stochastic rounding of one value to f16 with 32 caller-supplied random bits.
/// Same rule relative to the f16 spacing there (2^-24 in the subnormal range): rounds up iff
/// random_bits >= 2^32 - floor(f * 2^32), so P(up) = f exactly whenever f fits in 32 bits, which
/// holds for all |x| >= 2^-33 (below it f < 2^-9 is truncated to a multiple of 2^-32).
/// |x| in (65504, 65536) goes to Inf with probability (|x| - 65504) / 32 (Inf counts as 65536),
/// |x| >= 65536 always; NaN -> quiet NaN as in RNE; Inf stays Inf.
std::uint16_t f32_to_f16_bits_stochastic(float value, std::uint32_t random_bits) noexcept;

}  // namespace mixprec
