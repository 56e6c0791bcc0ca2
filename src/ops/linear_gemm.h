#pragma once
// Private: the GEMMs of linear, matmul and gelu_mlp on tensors (kernels::matmul with the matmul
// precision's flags, the work reported to the profiler), their dtype rules, the dtype a
// parameter gradient is computed in, and linear's autograd node.
#include <cstdint>

#include "kernels/matmul.h"
#include "mixprec/runtime/node.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::ops::detail {

/// DTypeError naming op unless a and b have one dtype (the GEMM's operands).
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
/// DTypeError naming op unless x and weight share a dtype and bias (when defined) has it or f32.
void check_linear_dtypes(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias);

/// A Linear's operands as its GEMM takes them: x as [m, in] (its leading dimensions
/// flattened), the weight [out, in] and the bias [out] (or undefined), each contiguous and
/// detached from autograd (the op records its own node).
struct LinearOperands {
  Tensor x2, w, b;
  std::int64_t m, in, out;
};
/// check_linear_shapes and check_linear_dtypes (ShapeError, DTypeError naming op), then the
/// operands.
LinearOperands linear_operands(const char* op, const Tensor& x, const Tensor& weight,
                               const Tensor& bias);

/// The descriptor of C[m, n] = op(A) op(B) with A, B contiguous row-major: A's dtype, C's, and
/// for f32 the matmul precision's bf16 products (medium) or TF32 (high, medium).
kernels::MatmulDesc gemm_desc(const Tensor& a, bool ta, bool tb, std::int64_t m, std::int64_t n,
                              std::int64_t k, const Tensor& c);
/// Reports a GEMM's work to the profiler: 2 m n k FLOPs (plus the bias adds and `extra` more,
/// a post-op's), A, B, C and the bias read or written at their dtypes' sizes.
void add_gemm_work(const kernels::MatmulDesc& d, double extra_flops = 0.0);
/// C[m, n] = op(A) op(B) [+ bias] by kernels::matmul (gemm_desc's flags), its work reported.
void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, std::int64_t m, std::int64_t n,
          std::int64_t k, Tensor& c, const Tensor* bias = nullptr);
/// The dtype to compute a parameter gradient in: f32 straight from the f32 accumulator when the
/// consumer (the cast from an f32 master, or an f32 leaf) wants f32 and takes any dtype, which
/// saves a rounding to 16 bits and a conversion pass; else the operand's own dtype.
DType grad_dtype(const runtime::Node& consumer, DType operand);
/// A Linear's input gradient dx [m, k] = dy [m, n] @ W [n, k] in x_dtype, shaped x_shape.
Tensor linear_input_grad(const Tensor& dy, const Tensor& w, DType x_dtype, const Shape& x_shape);
/// A Linear's weight gradient dW [n, k] = dy^T [n, m] @ x [m, k] in dtype (grad_dtype's).
Tensor linear_weight_grad(const Tensor& dy, const Tensor& x, DType dtype);
/// Records linear's node on its output y when x, weight or bias needs a gradient: x2 and w are
/// the operands its GEMM read (linear_operands), x, weight, bias the op's inputs (bias may be
/// undefined). For ops that run a linear inside them (gelu_mlp's first GEMM).
void record_linear(Tensor& y, const Tensor& x2, const Tensor& w, const Tensor& x,
                   const Tensor& weight, const Tensor& bias);
/// db[n] = the column sums of dy [m, n] (a Linear's bias gradient) in dtype, its work reported.
Tensor bias_grad(const Tensor& dy, std::int64_t m, std::int64_t n, DType dtype);

}  // namespace mixprec::ops::detail
