// gelu_mlp: Linear, GELU(tanh), Linear as one op, the GELU and its gradient in the GEMMs'
// epilogues (kernels::matmul_aux, matmul_post_op_backward).
#include "kernels/matmul.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/runtime/autocast.h"
#include "runtime/op_scope.h"
#include "ops/fp8_matmul.h"
#include "ops/linear_gemm.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::gemm;
using ops::detail::gemm_desc;
using ops::detail::grad_dtype;

/// Saves what the three ops' nodes would: the first linear's input and weight, GELU's input h
/// (the pre-activation the forward's epilogue kept), the second linear's input g and weight.
/// Its backward returns the five gradients the three nodes would, with the same bits: the
/// GELU's gradient and the first bias's are the epilogue of the GEMM of dg = dy W2.
class GeluMlpNode final : public runtime::Node {
 public:
  GeluMlpNode(Tensor x2d, Tensor w1, Tensor h, Tensor g, Tensor w2, DType b1_dtype,
              DType b2_dtype, Shape x_shape)
      : x_(std::move(x2d)), w1_(std::move(w1)), h_(std::move(h)), g_(std::move(g)),
        w2_(std::move(w2)), b1_dtype_(b1_dtype), b2_dtype_(b2_dtype), x_shape_(std::move(x_shape)) {}
  const char* name() const override { return "gelu_mlp"; }
  void release_saved() override { x_ = w1_ = h_ = g_ = w2_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const std::int64_t m = x_.size(0), hidden = w1_.size(0), e = w2_.size(0);
    const Tensor dy = dy_in.reshape({m, e}).contiguous().to(g_.dtype());
    Tensor dx, dw1, db1, dw2, db2;
    // The second linear's weight and bias gradients, as its node computes them.
    if (next[3].fn) dw2 = ops::detail::linear_weight_grad(dy, g_, grad_dtype(*next[3].fn, w2_.dtype()));
    if (next[4].fn) db2 = ops::detail::bias_grad(dy, m, e, grad_dtype(*next[4].fn, b2_dtype_));
    if (!next[0].fn && !next[1].fn && !next[2].fn) return {dx, dw1, db1, dw2, db2};
    // dh [m, h] = gelu'(h) (dy [m, e] @ W2 [e, h]), and db1 [h] its column sums, in one GEMM.
    Tensor dh = Tensor::empty({m, hidden}, h_.dtype());
    kernels::MatmulDesc desc = gemm_desc(dy, false, false, m, hidden, e, dh);
    desc.post_op = kernels::MatmulPostOp::gelu_tanh;
    if (next[2].fn) {
      db1 = Tensor::empty({hidden}, grad_dtype(*next[2].fn, b1_dtype_));
      desc.has_bias = true;  // names the bias gradient here
      desc.bias_dtype = db1.dtype();
    }
    kernels::matmul_post_op_backward(desc, dy.data_ptr(), w2_.data_ptr(), h_.data_ptr(),
                                     dh.data_ptr(), next[2].fn ? db1.data_ptr() : nullptr);
    ops::detail::add_gemm_work(desc, 2.0 * static_cast<double>(m * hidden));
    // The first linear's gradients from dh, as its node computes them.
    if (next[0].fn) dx = ops::detail::linear_input_grad(dh, w1_, x_.dtype(), x_shape_);
    if (next[1].fn) dw1 = ops::detail::linear_weight_grad(dh, x_, grad_dtype(*next[1].fn, w1_.dtype()));
    return {dx, dw1, db1, dw2, db2};
  }

 private:
  Tensor x_, w1_, h_, g_, w2_;
  DType b1_dtype_, b2_dtype_;
  Shape x_shape_;
};

}  // namespace

Tensor gelu_mlp(const Tensor& x_arg, const Tensor& fc_weight_arg, const Tensor& fc_bias_arg,
                const Tensor& proj_weight_arg, const Tensor& proj_bias_arg) {
  const char* op = "gelu_mlp";
  // A row of its own in the profile; the autocast policy is linear's.
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::op, op,
                                static_cast<int>(runtime::OpKind::linear));
  ops::detail::require_defined(op, x_arg, "x");
  ops::detail::require_defined(op, fc_weight_arg, "fc_weight");
  ops::detail::require_defined(op, proj_weight_arg, "proj_weight");
  if (ops::detail::any_fp8({&x_arg, &fc_weight_arg, &fc_bias_arg, &proj_weight_arg, &proj_bias_arg})) {
    // linear's fp8 path decodes to f32: no epilogue to fuse into.
    return linear(gelu(linear(x_arg, fc_weight_arg, fc_bias_arg), GeluApproximation::tanh),
                  proj_weight_arg, proj_bias_arg);
  }
  const std::vector<Tensor> cast_in = runtime::autocast_inputs(
      runtime::OpKind::linear,
      {&x_arg, &fc_weight_arg, &fc_bias_arg, &proj_weight_arg, &proj_bias_arg});
  const Tensor& x = cast_in[0];
  const Tensor& w1 = cast_in[1];
  const Tensor& b1 = cast_in[2];
  const Tensor& w2 = cast_in[3];
  const Tensor& b2 = cast_in[4];
  const ops::detail::LinearOperands fc = ops::detail::linear_operands(op, x, w1, b1);
  const std::int64_t m = fc.m, d = fc.in, hidden = fc.out;
  // g = gelu(h): the second linear's input, which its checks see.
  Tensor g = Tensor::empty({m, hidden}, x.dtype());
  const ops::detail::LinearOperands proj = ops::detail::linear_operands(op, g, w2, b2);
  const bool grad = runtime::needs_grad({&x, &w1, &b1, &w2, &b2});

  // h = x W1^T + b1, kept (only) for the backward.
  Tensor h = grad ? Tensor::empty({m, hidden}, x.dtype()) : Tensor();
  kernels::MatmulDesc desc = gemm_desc(fc.x2, false, true, m, hidden, d, g);
  desc.post_op = kernels::MatmulPostOp::gelu_tanh;
  desc.has_bias = fc.b.defined();
  desc.bias_dtype = fc.b.defined() ? fc.b.dtype() : x.dtype();
  const void* b1_data = fc.b.defined() ? fc.b.data_ptr() : nullptr;
  if (grad) {
    kernels::matmul_aux(desc, fc.x2.data_ptr(), fc.w.data_ptr(), b1_data, g.data_ptr(),
                        h.data_ptr());
  } else {
    kernels::matmul(desc, fc.x2.data_ptr(), fc.w.data_ptr(), b1_data, g.data_ptr());
  }
  ops::detail::add_gemm_work(desc, static_cast<double>(m * hidden));
  const std::int64_t e = proj.out;
  Tensor y = Tensor::empty({m, e}, x.dtype());
  gemm(g, false, proj.w, true, m, e, hidden, y, &proj.b);
  Shape out_shape = x.shape();
  out_shape.back() = e;
  y = y.reshape(out_shape);
  if (grad) {
    auto node = std::make_shared<GeluMlpNode>(fc.x2, fc.w, h, g, proj.w,
                                              b1.defined() ? b1.dtype() : x.dtype(),
                                              b2.defined() ? b2.dtype() : x.dtype(), x.shape());
    runtime::attach(y, node, {&x, &w1, &b1, &w2, &b2});
  }
  prof.done(y, {&x, &w1, &b1, &w2, &b2});
  return y;
}

}  // namespace mixprec
