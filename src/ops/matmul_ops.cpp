// matmul and linear with autograd; the GEMMs themselves run in kernels::matmul.
#include "mixprec/ops/nn_functional.h"
#include "mixprec/runtime/autocast.h"
#include "runtime/op_scope.h"
#include "ops/fp8_matmul.h"
#include "ops/linear_gemm.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::check_same_dtype;
using ops::detail::gemm;
using ops::detail::grad_dtype;
using ops::detail::record;

class LinearNode final : public runtime::Node {
 public:
  LinearNode(Tensor x2d, Tensor w, DType bias_dtype, Shape x_shape)
      : x_(std::move(x2d)), w_(std::move(w)), bias_dtype_(bias_dtype), x_shape_(std::move(x_shape)) {}
  const char* name() const override { return "linear"; }
  void release_saved() override { x_ = Tensor(); w_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const std::int64_t m = x_.size(0), n = w_.size(0);
    const Tensor dy = dy_in.reshape({m, n}).contiguous().to(x_.dtype());
    Tensor dx, dw, db;
    if (next[0].fn) dx = ops::detail::linear_input_grad(dy, w_, x_.dtype(), x_shape_);
    if (next[1].fn) dw = ops::detail::linear_weight_grad(dy, x_, grad_dtype(*next[1].fn, w_.dtype()));
    if (next.size() > 2 && next[2].fn) {  // db [n] = sum over rows of dy
      db = ops::detail::bias_grad(dy, m, n, grad_dtype(*next[2].fn, bias_dtype_));
    }
    return {dx, dw, db};
  }

 private:
  Tensor x_, w_;
  DType bias_dtype_;
  Shape x_shape_;
};

class MatmulNode final : public runtime::Node {
 public:
  MatmulNode(Tensor a, Tensor b) : a_(std::move(a)), b_(std::move(b)) {}
  const char* name() const override { return "matmul"; }
  void release_saved() override { a_ = Tensor(); b_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.contiguous().to(a_.dtype());
    const bool batched = a_.dim() == 3;
    const std::int64_t batch = batched ? a_.size(0) : 1;
    const std::int64_t m = a_.size(-2), k = a_.size(-1), n = b_.size(-1);
    Tensor da = next[0].fn ? Tensor::empty(a_.shape(), a_.dtype()) : Tensor();
    Tensor db = next[1].fn ? Tensor::empty(b_.shape(), b_.dtype()) : Tensor();
    for (std::int64_t i = 0; i < batch; ++i) {
      const Tensor dyi = batched ? dy.slice(0, i, i + 1).reshape({m, n}) : dy;
      const Tensor ai = batched ? a_.slice(0, i, i + 1).reshape({m, k}) : a_;
      const Tensor bi = batched ? b_.slice(0, i, i + 1).reshape({k, n}) : b_;
      if (da.defined()) {  // dA [m, k] = dY [m, n] @ B^T
        Tensor dai = batched ? da.slice(0, i, i + 1).reshape({m, k}) : da;
        gemm(dyi, false, bi, true, m, k, n, dai);
      }
      if (db.defined()) {  // dB [k, n] = A^T @ dY
        Tensor dbi = batched ? db.slice(0, i, i + 1).reshape({k, n}) : db;
        gemm(ai, true, dyi, false, k, n, m, dbi);
      }
    }
    return {da, db};
  }

 private:
  Tensor a_, b_;
};

}  // namespace

void ops::detail::record_linear(Tensor& y, const Tensor& x2, const Tensor& w, const Tensor& x,
                                const Tensor& weight, const Tensor& bias) {
  if (!runtime::needs_grad({&x, &weight, &bias})) return;
  auto node = std::make_shared<LinearNode>(x2, w, bias.defined() ? bias.dtype() : x.dtype(),
                                           x.shape());
  if (bias.defined()) runtime::attach(y, node, {&x, &weight, &bias});
  else runtime::attach(y, node, {&x, &weight});
}

Tensor linear(const Tensor& x_arg, const Tensor& weight_arg, const Tensor& bias_arg) {
  const char* op = "linear";
  runtime::detail::OpScope prof(runtime::OpKind::linear);
  ops::detail::require_defined(op, x_arg, "x");
  ops::detail::require_defined(op, weight_arg, "weight");
  if (ops::detail::any_fp8({&x_arg, &weight_arg, &bias_arg})) {
    return ops::detail::fp8_linear(x_arg, weight_arg, bias_arg);  // decode to f32, f32 GEMM
  }
  const std::vector<Tensor> cast_in =
      runtime::autocast_inputs(runtime::OpKind::linear, {&x_arg, &weight_arg, &bias_arg});
  const Tensor& x = cast_in[0];
  const Tensor& weight = cast_in[1];
  const Tensor& bias = cast_in[2];
  const auto [x2, w, b, m, in, out_features] = ops::detail::linear_operands(op, x, weight, bias);
  Tensor y = Tensor::empty({m, out_features}, x.dtype());
  gemm(x2, false, w, true, m, out_features, in, y, &b);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  y = y.reshape(out_shape);
  ops::detail::record_linear(y, x2, w, x, weight, bias);
  prof.done(y, {&x, &weight, &bias});
  return y;
}

Tensor matmul(const Tensor& a_arg, const Tensor& b_arg) {
  const char* op = "matmul";
  ops::detail::require_defined(op, a_arg, "a");
  ops::detail::require_defined(op, b_arg, "b");
  if (ops::detail::any_fp8({&a_arg, &b_arg})) {
    return ops::detail::fp8_matmul(a_arg, b_arg);  // decode to f32, f32 GEMM
  }
  const runtime::OpKind kind = a_arg.dim() == 3 ? runtime::OpKind::bmm : runtime::OpKind::matmul;
  runtime::detail::OpScope prof(kind);
  const std::vector<Tensor> cast_in = runtime::autocast_inputs(kind, {&a_arg, &b_arg});
  const Tensor& a = cast_in[0];
  const Tensor& b = cast_in[1];
  check_same_dtype(op, a, b);
  const bool plain = a.dim() == 2 && b.dim() == 2;
  const bool batched = a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0);
  MIXPREC_CHECK(plain || batched, ShapeError, op,
                "expected [M, K] @ [K, N] or [B, M, K] @ [B, K, N], got "
                    << to_string(a.shape()) << " @ " << to_string(b.shape()));
  MIXPREC_CHECK(a.size(-1) == b.size(-2), ShapeError, op,
                "inner dimensions differ: " << to_string(a.shape()) << " @ " << to_string(b.shape()));
  const Tensor ac = a.detach().contiguous(), bc = b.detach().contiguous();
  const std::int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const std::int64_t batch = batched ? a.size(0) : 1;
  Tensor y = Tensor::empty(batched ? Shape{batch, m, n} : Shape{m, n}, a.dtype());
  for (std::int64_t i = 0; i < batch; ++i) {
    const Tensor ai = batched ? ac.slice(0, i, i + 1) : ac;
    const Tensor bi = batched ? bc.slice(0, i, i + 1) : bc;
    Tensor yi = batched ? y.slice(0, i, i + 1) : y;
    gemm(ai, false, bi, false, m, n, k, yi);
  }
  record<MatmulNode>(y, {&a, &b}, ac, bc);
  prof.done(y, {&a, &b});
  return y;
}

}  // namespace mixprec
