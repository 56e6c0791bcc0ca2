#pragma once
/// Highway row kernel of masked_fill (masked_fill_simd.cpp): one contiguous run of x and of the
/// mask; masked_fill.cpp does layouts, threads and logging. Run-time dispatch.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu {

/// out[i] = mask[i] != 0 ? value (rounded to dtype) : x[i] (its bits), i < n. out may be x.
void masked_fill_row(const void* x, DType dtype, const void* mask, DType mask_dtype, float value,
                     void* out, std::int64_t n);

}  // namespace mixprec::kernels::cpu
