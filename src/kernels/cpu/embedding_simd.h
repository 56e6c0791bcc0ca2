#pragma once
/// Highway row kernels of the embedding family (embedding_simd.cpp), each on one row of n
/// elements; embedding.cpp does the index checks, the grouping by destination row, threads and
/// logging. Run-time dispatch to the best target the ISA cap allows.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu {

/// Copies `bytes` bytes from src to dst (no overlap): a row of the table, bit for bit.
void embedding_copy_row(const void* src, void* dst, std::size_t bytes);
/// acc[j] += src[j] (src of dtype widened to f32 exactly; one f32 addition per element).
void embedding_accumulate_row(float* acc, const void* src, DType dtype, std::int64_t n);
/// dst[j] = acc[j] rounded once (RNE) to dtype.
void embedding_store_row(const float* acc, void* dst, DType dtype, std::int64_t n);

}  // namespace mixprec::kernels::cpu
