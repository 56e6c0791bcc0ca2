#pragma once
/// Bulk dtype conversions of host arrays. Each call checks its arguments and runs the host
/// backend's conversion kernel (src/kernels/convert.h): on the cpu backend one Highway source
/// vectorised for every SIMD target and threaded over large arrays, on the ref backend the
/// scalar loops. Every backend and target is bit-identical to the scalar conversions of
/// core/half.h, core/float8.h and core/stochastic_rounding.h, the reference. They are kernels'
/// entry points (src/kernels/api_convert*.cpp), so they live on the kernels floor.
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
/// Any dtype to any dtype over n contiguous elements; 16-bit to 16-bit goes through f32, pairs
/// with an fp8 side widen exactly, then round once to nearest even.
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n);

/// f32 -> bf16 with stochastic rounding: rounds up with probability equal to the dropped fraction,
/// so the result is unbiased. Element i draws its random bits from counter (seed, offset + i), so
/// results do not depend on threading or on how the array is split. NaN/Inf behave as in RNE.
/// Element i is f32_to_bf16_bits_stochastic(src[i], random_bits(seed, offset + i))
/// (core/stochastic_rounding.h, core/random.h); throws ValueError if offset + n overflows 64
/// bits, or if src and dst overlap.
void convert_f32_to_bf16_stochastic(const float* src, bfloat16* dst, std::size_t n,
                                    std::uint64_t seed, std::uint64_t offset = 0);
/// f32 -> f16 with stochastic rounding (same contract as the bf16 version; subnormals included).
void convert_f32_to_f16_stochastic(const float* src, float16* dst, std::size_t n,
                                   std::uint64_t seed, std::uint64_t offset = 0);

/// fp8 -> f32: exact (the decoding of core/fp8_table.h). DTypeError unless format is an fp8
/// dtype; ValueError on null or overlapping buffers.
void convert_fp8_to_f32(const std::uint8_t* src, DType format, float* dst, std::size_t n);

/// f32 -> fp8 with one rounding to nearest even; NaN -> NaN, overflow -> NaN (E4M3) or Inf
/// (E5M2) (OCP's non-saturating mode), subnormals kept. DTypeError unless format is an fp8
/// dtype; ValueError on null or overlapping buffers.
void convert_f32_to_fp8(const float* src, std::uint8_t* dst, DType format, std::size_t n);

}  // namespace mixprec
