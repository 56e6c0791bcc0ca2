#pragma once
/// Bulk dtype conversions on contiguous buffers, as backend kernels. The public API is
/// mixprec/kernels/convert_arrays.h, which forwards here. The scalar conversions of half.h,
/// float8.h and stochastic_rounding.h (core/) are the specification; every backend is bit-identical to them.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// Converts n contiguous elements from src_dtype to dst_dtype (round to nearest even; any pair,
/// fp8 included). src and dst do not overlap (checked by the caller), except that for
/// src_dtype == dst_dtype the call is a memmove and overlap is fine.
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n);
/// f32 -> bf16 or f16 (dst_dtype) with stochastic rounding: element i uses
/// random_bits(seed, offset + i) of random.h (the caller checks offset + n does not overflow).
void convert_stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n,
                        std::uint64_t seed, std::uint64_t offset);
}  // namespace ref

namespace cpu {
/// out[i] = random_bits(seed, offset + i) of random.h: the vector Philox behind
/// fill_random_bits (mixprec/kernels/random_arrays.h, which checks the arguments; not a backend entry: there is one definition
/// of the stream, and every backend must reproduce it).
void philox_fill(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n);
}  // namespace cpu

/// The convert kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_CONVERT_KERNELS(X) X(convert) X(convert_stochastic)
MIXPREC_CONVERT_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
