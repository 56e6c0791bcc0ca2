#pragma once
/// The fp8 recipes' scaled, saturating cast on Highway lanes (convert_simd.cpp), dispatched to
/// the best target max_isa() allows: the element and the amax rule of kernels/spec/
/// fp8_scale_math.h, bit for bit, for one contiguous span (fp8_scale.cpp splits the array over
/// the threads).
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu {

/// out[i] = saturating_fp8_bits(x[i] * scale) in E4M3 (e4m3) or E5M2 when out is not null, for
/// n elements of x (f32, bf16 or f16); returns max |x[i]| as an f32 bit pattern (abs_bits: NaN
/// above Inf above every finite value).
std::uint32_t fp8_scaled_cast_span(const void* x, DType x_dtype, std::uint8_t* out, std::size_t n,
                                   float scale, bool e4m3);

}  // namespace mixprec::kernels::cpu
