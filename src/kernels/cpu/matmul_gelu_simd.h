#pragma once
/// The Highway pass of the cpu backend's gelu_tanh backward form (matmul_gelu_simd.cpp), run by
/// matmul_gelu.cpp over the tiles of column_tiles.h after oneDNN wrote the GEMM's result.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu {

/// Over rows [k0, k1) and columns [j0, j1) of the row-major [*, n] matrices c and aux (dtype
/// f32, bf16 or f16): c = gelu_tanh'(aux) c rounded to dtype, in place, with the vector
/// gradient of the elementwise gelu_tanh (the same bits as unary_backward), and sums[j - j0] =
/// column j of the new c summed in f32 in row order (the accumulator reduce's column tiles
/// keep; sums null: none). Runs the best Highway target the ISA cap allows.
void gelu_tanh_backward_tile(DType dtype, void* c, const void* aux, std::int64_t n,
                             std::int64_t k0, std::int64_t k1, std::int64_t j0, std::int64_t j1,
                             float* sums);

}  // namespace mixprec::kernels::cpu
