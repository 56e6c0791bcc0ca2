#pragma once
// Private: the fp8 half of convert() (convert.cpp routes every dtype pair with an fp8 side here).
#include <cstddef>

#include "mixprec/core/dtype.h"

namespace mixprec::detail {

/// Converts n contiguous elements between two different dtypes, at least one of them fp8:
/// fp8 -> f32/bf16/f16 is exact (every fp8 value is representable in each); f32 -> fp8 rounds
/// once; bf16/f16 -> fp8 widens exactly to f32, then rounds once; fp8 -> other fp8 decodes
/// exactly, then rounds once. Buffers are checked by the caller.
void convert_fp8_pair(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n);

}  // namespace mixprec::detail
