#pragma once
/// AVX-512 row kernel of 2x2 stride-2 max pooling without padding (pool_avx512.cpp): a plain
/// declaration only. Call only when max_isa() >= Isa::avx512 (kernels/cpu/pool.cpp checks).
#include <cstdint>

namespace mixprec::kernels::avx512 {

/// One output row: row0 and row1 are the two input rows (w elements each, dtype code 0 f32,
/// 1 bf16, 2 f16, as DType's values) starting at plane index `row0_index`; writes wo = w / 2
/// winners' plane indices to idx, each the first maximum in the order (0,0), (0,1), (1,0),
/// (1,1), NaN winning, exactly as ref::max_pool2d decides. The caller copies the winners.
void max_pool2x2_row(const void* row0, const void* row1, int dtype, std::int64_t w,
                     std::int32_t row0_index, std::int32_t* idx);

}  // namespace mixprec::kernels::avx512
