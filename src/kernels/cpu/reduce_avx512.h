#pragma once
/// AVX-512 reduction kernels (reduce_avx512.cpp): plain declarations only. They return the
/// accumulator before its finishing step (mean divides by n, norm2 takes the square root; the
/// caller does that), so partial results of chunks can be combined. Call only when
/// max_isa() >= Isa::avx512. Dtype codes are DType's underlying values.
#include <cstdint>

namespace mixprec::kernels::avx512 {

/// Mirrors kernels::ReduceOp value for value (static_asserts in cpu/reduce.cpp).
enum class VReduce : int { sum, mean, max, min, amax, norm1, norm2 };

/// Accumulator of op over the n contiguous elements in[0..n): sum of x (sum, mean), of |x|
/// (norm1), of x^2 (norm2), or the NaN-propagating max x / min x / max |x|. An empty range gives
/// the identity (0, -Inf, +Inf, 0).
float reduce_contiguous(VReduce op, const void* in, int dtype, std::int64_t n);

/// acc[j - j0] = accumulator of op over in[k * inner + j] for k < n, for each column j in
/// [j0, j1). Each column is accumulated in index order k = 0, 1, ..., like the reference.
void reduce_columns(VReduce op, const void* in, int dtype, std::int64_t n, std::int64_t inner,
                    std::int64_t j0, std::int64_t j1, float* acc);

}  // namespace mixprec::kernels::avx512
