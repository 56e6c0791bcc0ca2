// The GEMMs of the Linear-like ops on tensors (ops/linear_gemm.h).
#include "ops/linear_gemm.h"

#include <algorithm>

#include "kernels/reduce.h"
#include "mixprec/core/error.h"
#include "mixprec/runtime/matmul_precision.h"
#include "ops/linear_shapes.h"
#include "runtime/op_scope.h"

namespace mixprec::ops::detail {

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  MIXPREC_CHECK(a.dtype() == b.dtype(), DTypeError, op,
                "operands have different dtypes (" << name(a.dtype()) << " and "
                                                   << name(b.dtype())
                                                   << "); cast one with .to(), or run under "
                                                      "runtime::Autocast which casts both");
}

void check_linear_dtypes(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_dtype(op, x, weight);
  if (bias.defined()) {
    MIXPREC_CHECK(bias.dtype() == weight.dtype() || bias.dtype() == DType::f32, DTypeError, op,
                  "bias is " << name(bias.dtype()) << " but weight is " << name(weight.dtype())
                             << "; use the weight's dtype or f32 for the bias");
  }
}

LinearOperands linear_operands(const char* op, const Tensor& x, const Tensor& weight,
                               const Tensor& bias) {
  check_linear_shapes(op, x, weight, bias);
  check_linear_dtypes(op, x, weight, bias);
  const std::int64_t in = weight.size(1), out = weight.size(0);
  const std::int64_t m = x.numel() / std::max<std::int64_t>(in, 1);
  return {x.detach().contiguous().reshape({m, in}), weight.detach().contiguous(),
          bias.defined() ? bias.detach().contiguous() : Tensor(), m, in, out};
}

kernels::MatmulDesc gemm_desc(const Tensor& a, bool ta, bool tb, std::int64_t m, std::int64_t n,
                              std::int64_t k, const Tensor& c) {
  kernels::MatmulDesc d;
  d.m = m; d.n = n; d.k = k;
  d.trans_a = ta; d.trans_b = tb;
  d.dtype = a.dtype();
  d.c_dtype = c.dtype();
  d.bf16_fpmath = a.dtype() == DType::f32 && runtime::matmul_precision() == runtime::MatmulPrecision::medium;
  d.tf32 = a.dtype() == DType::f32 && runtime::matmul_precision() != runtime::MatmulPrecision::highest;
  return d;
}

void add_gemm_work(const kernels::MatmulDesc& d, double extra_flops) {
  const auto size = [](DType t) { return static_cast<std::int64_t>(size_of(t)); };
  // 2*M*N*K (plus the bias adds); bytes: A, B, bias read and C written, at their dtype sizes.
  runtime::detail::add_work(
      2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k) +
          (d.has_bias ? static_cast<double>(d.m * d.n) : 0.0) + extra_flops,
      static_cast<double>(d.m * d.k * size(d.dtype) + d.k * d.n * size(d.dtype) +
                          d.m * d.n * size(d.c_dtype)) +
          (d.has_bias ? static_cast<double>(d.n * size(d.bias_dtype)) : 0.0));
}

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, std::int64_t m, std::int64_t n,
          std::int64_t k, Tensor& c, const Tensor* bias) {
  kernels::MatmulDesc d = gemm_desc(a, ta, tb, m, n, k, c);
  const void* bias_data = nullptr;
  if (bias != nullptr && bias->defined()) {
    d.has_bias = true;
    d.bias_dtype = bias->dtype();
    bias_data = bias->data_ptr();
  }
  kernels::matmul(d, a.data_ptr(), b.data_ptr(), bias_data, c.data_ptr());
  add_gemm_work(d);
}

DType grad_dtype(const runtime::Node& consumer, DType operand) {
  const bool wants_f32 =
      consumer.accepts_any_grad_dtype() && consumer.preferred_grad_dtype() == DType::f32;
  return wants_f32 ? DType::f32 : operand;
}

Tensor linear_input_grad(const Tensor& dy, const Tensor& w, DType x_dtype, const Shape& x_shape) {
  const std::int64_t m = dy.size(0), n = dy.size(1), k = w.size(1);
  Tensor dx = Tensor::empty({m, k}, x_dtype);
  gemm(dy, false, w, false, m, k, n, dx);
  return dx.reshape(x_shape);
}

Tensor linear_weight_grad(const Tensor& dy, const Tensor& x, DType dtype) {
  const std::int64_t m = dy.size(0), n = dy.size(1), k = x.size(1);
  Tensor dw = Tensor::empty({n, k}, dtype);
  gemm(dy, true, x, false, n, k, m, dw);
  return dw;
}

Tensor bias_grad(const Tensor& dy, std::int64_t m, std::int64_t n, DType dtype) {
  Tensor db = Tensor::empty({n}, dtype);
  kernels::reduce(kernels::ReduceOp::sum, dy.data_ptr(), dy.dtype(), 1, m, n, db.data_ptr(), dtype);
  runtime::detail::add_work(static_cast<double>(m * n), static_cast<double>(dy.nbytes() + db.nbytes()));
  return db;
}

}  // namespace mixprec::ops::detail
