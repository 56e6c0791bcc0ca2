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

/// The GELU and the second linear as one node: it saves what their two nodes would (GELU's
/// input h, the pre-activation the forward's epilogue kept; the second linear's input g and
/// weight) and returns, with their bits, the second linear's weight and bias gradients and, in
/// one GEMM with the GELU's derivative and the bias gradient in its epilogue, dh = gelu'(h)
/// (dy W2) and the first bias's gradient (its column sums). dh goes on to the first linear's
/// own node (linear's LinearNode, recorded on h), which runs after this one has let go of h, g
/// and W2, as the unfused graph does: the step's memory peak does not move.
class GeluLinearNode final : public runtime::Node {
 public:
  GeluLinearNode(Tensor h, Tensor g, Tensor w2, DType b2_dtype, DType b1_dtype)
      : h_(std::move(h)), g_(std::move(g)), w2_(std::move(w2)), b2_dtype_(b2_dtype),
        b1_dtype_(b1_dtype) {}
  const char* name() const override { return "gelu_mlp"; }
  void release_saved() override { h_ = g_ = w2_ = Tensor(); }
  /// Inputs: h (the first linear's output), W2, b2, b1.
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const std::int64_t m = g_.size(0), hidden = g_.size(1), e = w2_.size(0);
    const Tensor dy = dy_in.reshape({m, e}).contiguous().to(g_.dtype());
    Tensor dh, dw2, db2, db1;
    // The second linear's weight and bias gradients, as its node computes them.
    if (next[1].fn) dw2 = ops::detail::linear_weight_grad(dy, g_, grad_dtype(*next[1].fn, w2_.dtype()));
    if (next[2].fn) db2 = ops::detail::bias_grad(dy, m, e, grad_dtype(*next[2].fn, b2_dtype_));
    if (!next[0].fn && !next[3].fn) return {dh, dw2, db2, db1};
    // dh [m, h] = gelu'(h) (dy [m, e] @ W2 [e, h]), and db1 [h] its column sums, in one GEMM.
    dh = Tensor::empty({m, hidden}, h_.dtype());
    kernels::MatmulDesc desc = gemm_desc(dy, false, false, m, hidden, e, dh);
    desc.post_op = kernels::MatmulPostOp::gelu_tanh;
    if (next[3].fn) {
      db1 = Tensor::empty({hidden}, grad_dtype(*next[3].fn, b1_dtype_));
      desc.has_bias = true;  // names the bias gradient here
      desc.bias_dtype = db1.dtype();
    }
    kernels::matmul_post_op_backward(desc, dy.data_ptr(), w2_.data_ptr(), h_.data_ptr(),
                                     dh.data_ptr(), next[3].fn ? db1.data_ptr() : nullptr);
    ops::detail::add_gemm_work(desc, 2.0 * static_cast<double>(m * hidden));
    return {dh, dw2, db2, db1};
  }

 private:
  Tensor h_, g_, w2_;
  DType b2_dtype_, b1_dtype_;
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
    // The first linear's node on h (without its bias: the next node returns b1's gradient),
    // then the GELU and second linear's node on y.
    ops::detail::record_linear(h, fc.x2, fc.w, x, w1, Tensor());
    auto node = std::make_shared<GeluLinearNode>(h.detach(), g, proj.w,
                                                 b2.defined() ? b2.dtype() : x.dtype(),
                                                 b1.defined() ? b1.dtype() : x.dtype());
    runtime::attach(y, node, {&h, &w2, &b2, &b1});
  }
  prof.done(y, {&x, &w1, &b1, &w2, &b2});
  return y;
}

}  // namespace mixprec
