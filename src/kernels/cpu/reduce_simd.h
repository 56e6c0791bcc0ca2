#pragma once
/// Entry points of the Highway reduction kernels (reduce_simd.cpp), each dispatched to the best
/// target Highway allows at run time (Isa cap included). They return accumulators before the
/// finishing step (mean divides by n, norm2 takes the square root; reduce.cpp does that), so
/// partial results of fixed chunks can be combined. dtype is f32, bf16 or f16.
#include <cstdint>

#include "kernels/reduce.h"

namespace mixprec::kernels::cpu {

/// Accumulator of op over the n contiguous elements of `in`: sum of x (sum, mean), of |x|
/// (norm1), of x^2 (norm2), or the max x / min x / max |x| bit-identical to the reference's fold
/// (NaN-propagating). n == 0 gives the identity (0, -Inf, +Inf, 0).
float simd_reduce_row(ReduceOp op, DType dtype, const void* in, std::int64_t n);

/// acc[j - j0] = accumulator of op over in[k * inner + j] for k in [k0, k1), j in [j0, j1); each
/// column folds in index order k0, k0 + 1, ..., like the reference.
void simd_reduce_columns(ReduceOp op, DType dtype, const void* in, std::int64_t k0,
                         std::int64_t k1, std::int64_t inner, std::int64_t j0, std::int64_t j1,
                         float* acc);

}  // namespace mixprec::kernels::cpu
