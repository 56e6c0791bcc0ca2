// Unary, binary and affine elementwise ops with their autograd nodes.
#include "mixprec/ops/elementwise.h"

#include "mixprec/runtime/autocast.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"
#include "runtime/cast_node.h"
#include "tensor/tensor_methods.h"

namespace mixprec {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;
using ops::detail::record;
using ops::detail::strided;

class UnaryNode final : public runtime::Node {
 public:
  /// Keeps only the operand the op's gradient formula reads (kernels::grad_reads_x): the
  /// forward input or the output. Saving both held, for example, GELU's output until the
  /// backward even when the next layer keeps only an fp8 copy of it.
  UnaryNode(UnaryOp op, const Tensor& x, const Tensor& y)
      : op_(op),
        saved_(kernels::grad_reads_x(op) ? x : y),
        x_shape_(x.shape()),
        x_dtype_(x.dtype()),
        format_(x.memory_format()) {}
  const char* name() const override { return kernels::name(op_); }
  void release_saved() override { saved_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy) override {
    // The saved operand, dy and dx all in x's memory format: the kernel pairs elements by
    // position.
    const Tensor g = dy.contiguous(format_);
    Tensor dx = Tensor::empty(x_shape_, x_dtype_, format_);
    const bool reads_x = kernels::grad_reads_x(op_);
    const void* v = saved_.data_ptr();
    kernels::unary_backward(op_, reads_x ? v : nullptr, x_dtype_, reads_x ? nullptr : v,
                            saved_.dtype(), g.data_ptr(), g.dtype(), dx.data_ptr(), dx.dtype(),
                            dx.numel());
    return {dx};
  }

 private:
  UnaryOp op_;
  Tensor saved_;  // dense x or y, in x's memory format
  Shape x_shape_;
  DType x_dtype_;
  MemoryFormat format_;
};

Tensor unary_op(runtime::OpKind kind, UnaryOp op, const Tensor& x_arg) {
  const char* op_name = kernels::name(op);
  runtime::detail::OpScope prof(kind);
  ops::detail::require_defined(op_name, x_arg, "x");
  const Tensor x_in = runtime::autocast_inputs(kind, {&x_arg})[0];
  // A channels-last input stays so (a convnet's ReLU): the kernel maps the dense memory as one
  // row, whatever order its elements are in.
  const MemoryFormat format = x_in.memory_format();
  const Tensor x = x_in.contiguous(format);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), format);
  const Shape flat{x.numel()}, unit{1};
  kernels::unary(op, flat, {x.data_ptr(), x.dtype(), unit}, y.data_ptr(), y.dtype());
  record<UnaryNode>(y, {&x_in}, op, x.detach(), y.detach());
  prof.done(y, {&x_in});
  return y;
}

class BinaryNode final : public runtime::Node {
 public:
  BinaryNode(BinaryOp op, Tensor a, Tensor b, bool need_a, bool need_b)
      : op_(op), a_(std::move(a)), b_(std::move(b)), need_a_(need_a), need_b_(need_b) {}
  const char* name() const override { return kernels::name(op_); }
  void release_saved() override { a_ = Tensor(); b_ = Tensor(); }

  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor da, db;
    switch (op_) {
      case BinaryOp::add: da = dy; db = dy; break;
      case BinaryOp::sub: da = dy; db = neg(dy); break;
      case BinaryOp::mul:
        if (need_a_) da = mul(dy, b_);
        if (need_b_) db = mul(dy, a_);
        break;
      case BinaryOp::div:
        if (need_a_) da = div(dy, b_);
        if (need_b_) db = neg(div(mul(dy, a_), mul(b_, b_)));
        break;
      case BinaryOp::maximum:
      case BinaryOp::minimum: {
        // Route the gradient to the selected operand: a where it won (ties go to a).
        const Tensor picked = ops::detail::binary_raw(op_, a_, b_);
        const Tensor mask_a = equal_mask(a_, picked);
        if (need_a_) da = mul(dy, mask_a);
        if (need_b_) db = mul(dy, affine(mask_a, -1.0f, 1.0f));
        break;
      }
      case BinaryOp::pow:  // pow(x, p) has its own node (pow_cumsum_ops.cpp)
      case BinaryOp::eq:
      case BinaryOp::ge:  // comparisons: no gradient
        MIXPREC_ASSERT(false);
    }
    Tensor ga = need_a_ && da.defined() ? ops::detail::sum_to_shape(da, a_shape()) : Tensor();
    Tensor gb = need_b_ && db.defined() ? ops::detail::sum_to_shape(db, b_shape()) : Tensor();
    if (ga.defined() && ga.dtype() != a_dtype_) ga = ga.to(a_dtype_);
    if (gb.defined() && gb.dtype() != b_dtype_) gb = gb.to(b_dtype_);
    return {ga, gb};
  }

  void set_input_meta(const Tensor& a, const Tensor& b) {
    a_shape_ = a.shape(); b_shape_ = b.shape(); a_dtype_ = a.dtype(); b_dtype_ = b.dtype();
  }

 private:
  const Shape& a_shape() const { return a_shape_; }
  const Shape& b_shape() const { return b_shape_; }
  // 1 where a equals the selected value, else 0 (as a tensor of the compute dtype), computed
  // by the eq kernel in tensor memory.
  static Tensor equal_mask(const Tensor& a, const Tensor& picked) {
    return ops::detail::binary_raw(BinaryOp::eq, a, picked, picked.dtype());
  }

  BinaryOp op_;
  Tensor a_, b_;
  bool need_a_, need_b_;
  Shape a_shape_, b_shape_;
  DType a_dtype_ = DType::f32, b_dtype_ = DType::f32;
};

Tensor binary_op(runtime::OpKind kind, BinaryOp op, const Tensor& a_arg, const Tensor& b_arg) {
  runtime::detail::OpScope prof(kind);
  ops::detail::require_defined(kernels::name(op), a_arg, "a");
  ops::detail::require_defined(kernels::name(op), b_arg, "b");
  // promote under autocast casts nothing here: the kernel widens each operand exactly as it
  // loads it and binary_raw stores the widest dtype, so casting the narrower operand first would
  // give the same values, dtype and gradients, for a pass and an f32 copy kept until backward
  // (a transformer's residual adds meet a 16-bit sublayer output and an f32 stream). Not div:
  // its gradient squares b, which a 16-bit b would do in 16 bits.
  const bool casts = !runtime::autocast_enabled() || op == BinaryOp::div ||
                     runtime::policy_row(kind).policy != runtime::CastPolicy::promote;
  if (!casts) {
    require_compute_dtype(kernels::name(op), a_arg.dtype());
    require_compute_dtype(kernels::name(op), b_arg.dtype());
  }
  const std::vector<Tensor> in =
      casts ? runtime::autocast_inputs(kind, {&a_arg, &b_arg}) : std::vector<Tensor>{a_arg, b_arg};
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  Tensor out = ops::detail::binary_raw(op, a, b);
  ops::detail::record_binary(op, out, a, b);
  prof.done(out, {&a, &b});
  return out;
}

}  // namespace

void ops::detail::record_binary(BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b) {
  if (!runtime::needs_grad({&a, &b})) return;
  // The gradients of add and sub need neither operand: saving them would keep both alive
  // until backward (a transformer's residual stream and every block's MLP output).
  const bool saves = op != BinaryOp::add && op != BinaryOp::sub;
  auto node = std::make_shared<BinaryNode>(op, saves ? a.detach() : Tensor(),
                                           saves ? b.detach() : Tensor(), a.requires_grad(),
                                           b.requires_grad());
  node->set_input_meta(a, b);
  runtime::attach(out, node, {&a, &b});
}

namespace {

class AffineNode final : public runtime::Node {
 public:
  AffineNode(float alpha, DType in_dtype) : alpha_(alpha), in_dtype_(in_dtype) {}
  const char* name() const override { return "affine"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor g = dy.contiguous();
    Tensor dx = Tensor::empty(g.shape(), in_dtype_);
    kernels::affine(g.data_ptr(), g.dtype(), dx.data_ptr(), in_dtype_, g.numel(), alpha_, 0.0f);
    return {dx};
  }

 private:
  float alpha_;
  DType in_dtype_;
};

}  // namespace

#define MIXPREC_DEFINE_UNARY_FN(op, api, ...) \
  MIXPREC_OP_IF_##api(Tensor op(const Tensor& x) { return unary_op(runtime::OpKind::op, UnaryOp::op, x); })
MIXPREC_UNARY_OPS(MIXPREC_DEFINE_UNARY_FN)
#undef MIXPREC_DEFINE_UNARY_FN

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  return unary_op(runtime::OpKind::gelu,
                  approximate == GeluApproximation::tanh ? UnaryOp::gelu_tanh : UnaryOp::gelu, x);
}

#define MIXPREC_DEFINE_BINARY_FN(op, api, ...)                 \
  MIXPREC_OP_IF_##api(Tensor op(const Tensor& a, const Tensor& b) { \
    return binary_op(runtime::OpKind::op, BinaryOp::op, a, b);          \
  })
MIXPREC_BINARY_OPS(MIXPREC_DEFINE_BINARY_FN)
#undef MIXPREC_DEFINE_BINARY_FN

Tensor affine(const Tensor& x_in, float alpha, float beta) {
  runtime::detail::OpScope prof(runtime::OpKind::affine);
  ops::detail::require_defined("affine", x_in, "x");
  require_compute_dtype("affine", x_in.dtype());
  const Tensor x = x_in.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  kernels::affine(x.data_ptr(), x.dtype(), y.data_ptr(), y.dtype(), x.numel(), alpha, beta);
  record<AffineNode>(y, {&x_in}, alpha, x_in.dtype());
  prof.done(y, {&x_in});
  return y;
}

Tensor cast(const Tensor& x, DType dtype) {
  ops::detail::require_defined("cast", x, "x");
  if (x.dtype() == dtype) return x;
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::cast, "cast");
  Tensor y = ops::detail::materialize(x, dtype, MemoryCategory::activation, x.memory_format());
  record<runtime::CastNode>(y, {&x}, x.dtype());
  prof.done(y, {&x});
  return y;
}

namespace {
// Tensor::to(DType) is the cast op (tensor/tensor_methods.h), installed while the library loads.
[[maybe_unused]] const bool kToInstalled = [] {
  detail::tensor_method_table().to = [](const Tensor& self, DType dtype) {
    return cast(self, dtype);
  };
  return true;
}();
}  // namespace

}  // namespace mixprec
