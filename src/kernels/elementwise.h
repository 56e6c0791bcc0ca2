#pragma once
/// Elementwise kernels on raw buffers: unary and binary ops (with broadcasting) and their
/// backward helpers. Every function exists twice: kernels::ref:: (plain scalar loops, the spec)
/// and kernels:: (dispatches to the fastest implementation the CPU allows, else the reference).
/// Values are loaded to f32, computed in f32 and rounded once (RNE) to the output dtype.
#include <cstdint>
#include <span>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels {

/// Unary elementwise ops. gelu is the exact erf form: x * 0.5 * (1 + erf(x / sqrt(2))).
enum class UnaryOp : std::uint8_t {
  neg, abs, exp, log, sqrt, rsqrt, reciprocal, square, relu, gelu, tanh, sigmoid
};
/// Binary elementwise ops.
enum class BinaryOp : std::uint8_t { add, sub, mul, div, maximum, minimum };

const char* name(UnaryOp op);
const char* name(BinaryOp op);

/// A read-only strided operand: data pointer, dtype and per-dimension strides in elements
/// (stride 0 on a broadcast dimension). Its shape is the shape passed to the kernel.
struct StridedInput {
  const void* data;
  DType dtype;
  std::span<const std::int64_t> strides;
};

/// out[i] = op(in[i]) over `shape`; out is contiguous row-major with out_dtype; in is strided.
void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype);
/// out = op(a, b) over `shape` (the broadcast shape); a and b are strided views of that shape
/// (stride 0 where broadcast) and may have different dtypes; out is contiguous with out_dtype.
void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype);
/// out = alpha * in + beta (contiguous, n elements, same dtype layout rules as unary).
void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta);
/// dx = dy * d op(x)/dx for a unary op, given the forward input x and output y (contiguous, all
/// same length n; dtypes may differ; dx has dx_dtype). Uses whichever of x or y is cheaper.
void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n);
/// Fills n contiguous elements of dtype with value (rounded once to dtype).
void fill(void* out, DType dtype, std::int64_t n, float value);

namespace ref {
void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype);
void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype);
void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta);
void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n);
void fill(void* out, DType dtype, std::int64_t n, float value);
}  // namespace ref

namespace cpu {
void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype);
void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype);
void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta);
void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n);
void fill(void* out, DType dtype, std::int64_t n, float value);
}  // namespace cpu

}  // namespace mixprec::kernels
