#pragma once
/// Highway elementwise row kernels (elementwise_simd.cpp): contiguous runs of n elements, any
/// mix of the compute dtypes f32/bf16/f16 on every operand and the output, f32 compute, one
/// RNE rounding on store. Each call runs the best Highway target the ISA cap allows (run-time
/// dispatch). The dispatcher (elementwise.cpp) does layouts, threads and verbose logging;
/// these functions never see a storage-only (fp8) dtype.
#include <cstdint>

#include "kernels/elementwise.h"
#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu {

/// out[i] = op(in[i]), i < n.
void unary_row(UnaryOp op, const void* in, DType in_dtype, void* out, DType out_dtype,
               std::int64_t n);

/// Which operand of binary_row is one broadcast value instead of a run of n elements.
enum class ScalarSide : std::uint8_t { none, a, b };

/// out[i] = op(a[i], b[i]), i < n. With ScalarSide::a (b), a (b) is ignored and `scalar` (the
/// broadcast operand, already widened to f32) takes its place.
void binary_row(BinaryOp op, const void* a, DType a_dtype, const void* b, DType b_dtype,
                ScalarSide side, float scalar, void* out, DType out_dtype, std::int64_t n);

/// out[i] = alpha * in[i] + beta: a multiply and an add, each rounded, like the reference.
void affine_row(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
                float alpha, float beta);

/// dx[i] = op'(v[i]) dy[i] in the reference's formula, v the forward input x where
/// grad_reads_x(op), else the forward output y.
void unary_backward_row(UnaryOp op, const void* v, DType v_dtype, const void* dy, DType dy_dtype,
                        void* dx, DType dx_dtype, std::int64_t n);

/// out[i] = value rounded once to dtype.
void fill_row(void* out, DType dtype, std::int64_t n, float value);

}  // namespace mixprec::kernels::cpu
