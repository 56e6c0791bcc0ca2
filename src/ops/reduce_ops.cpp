// Reductions over one axis or the whole tensor, with autograd.
#include "mixprec/ops/reduce.h"

#include "kernels/reduce.h"
#include "mixprec/ops/combine.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/runtime/autocast.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using kernels::ReduceOp;
using ops::detail::record;

struct AxisSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
  Shape kept;     // output shape with the axis kept as 1
  Shape dropped;  // output shape with the axis removed
};

AxisSplit split(const Shape& shape, std::int64_t axis) {
  AxisSplit s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto ai = static_cast<std::int64_t>(i);
    if (ai < axis) s.outer *= shape[i];
    if (ai == axis) s.n = shape[i];
    if (ai > axis) s.inner *= shape[i];
    s.kept.push_back(ai == axis ? 1 : shape[i]);
    if (ai != axis) s.dropped.push_back(shape[i]);
  }
  return s;
}

Tensor reduce_raw(ReduceOp op, const Tensor& x, const AxisSplit& s, const Shape& out_shape) {
  const Tensor c = x.contiguous();
  Tensor out = Tensor::empty(out_shape, x.dtype());
  kernels::reduce(op, c.data_ptr(), c.dtype(), s.outer, s.n, s.inner, out.data_ptr(), out.dtype());
  return out;
}

// Gradient of sum/mean: broadcast dy (shape with the axis kept as 1) back to the input shape.
class SumNode final : public runtime::Node {
 public:
  SumNode(Shape in_shape, Shape kept, float scale, DType dtype)
      : in_shape_(std::move(in_shape)), kept_(std::move(kept)), scale_(scale), dtype_(dtype) {}
  const char* name() const override { return "sum"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor g = dy.reshape(kept_);
    Tensor dx = Tensor::empty(in_shape_, dtype_);
    const Shape gs = ops::detail::broadcast_strides(g, in_shape_);
    const Tensor scale = Tensor::scalar(scale_, DType::f32);
    const Shape ss(in_shape_.size(), 0);
    kernels::binary(kernels::BinaryOp::mul, in_shape_, {g.data_ptr(), g.dtype(), gs},
                    {scale.data_ptr(), DType::f32, ss}, dx.data_ptr(), dtype_);
    return {dx};
  }

 private:
  Shape in_shape_, kept_;
  float scale_;
  DType dtype_;
};

class AmaxNode final : public runtime::Node {
 public:
  AmaxNode(Tensor x, Tensor max_kept) : x_(std::move(x)), max_(std::move(max_kept)) {}
  const char* name() const override { return "amax"; }
  void release_saved() override { x_ = Tensor(); max_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy) override {
    // Ties share the gradient equally, as in torch.amax. The mask (1 where x equals its
    // row's maximum) is the eq kernel over x and the kept maximum broadcast, in tensor memory.
    const Tensor m = ops::detail::binary_raw(kernels::BinaryOp::eq, x_, max_, DType::f32);
    Tensor count = sum(m, axis_, true);
    const Tensor g = dy.reshape(max_.shape());
    Tensor dx = div(mul(m, g), count).to(x_.dtype());
    return {dx};
  }
  std::int64_t axis_ = 0;

 private:
  Tensor x_, max_;
};

Tensor reduce_all(ReduceOp op, const Tensor& x, const char* name) {
  ops::detail::require_defined(name, x, "x");
  const AxisSplit s{1, x.numel(), 1, {}, {}};
  MIXPREC_CHECK(op == ReduceOp::sum || op == ReduceOp::mean || x.numel() > 0, ShapeError, name,
                "cannot reduce an empty tensor");
  return reduce_raw(op, x, s, {});
}

}  // namespace

Tensor sum(const Tensor& x_arg) {
  runtime::detail::OpScope prof(runtime::OpKind::sum);
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::sum, {&x_arg})[0];
  Tensor out = reduce_all(ReduceOp::sum, x, "sum");
  record<SumNode>(out, {&x}, x.shape(), Shape(x.shape().size(), 1), 1.0f, x.dtype());
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

Tensor mean(const Tensor& x_arg) {
  runtime::detail::OpScope prof(runtime::OpKind::mean);
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::mean, {&x_arg})[0];
  Tensor out = reduce_all(ReduceOp::mean, x, "mean");
  const float scale = x.numel() > 0 ? 1.0f / static_cast<float>(x.numel()) : 0.0f;
  record<SumNode>(out, {&x}, x.shape(), Shape(x.shape().size(), 1), scale, x.dtype());
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

Tensor sum(const Tensor& x_arg, std::int64_t dim, bool keepdim) {
  runtime::detail::OpScope prof(runtime::OpKind::sum);
  ops::detail::require_defined("sum", x_arg, "x");
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::sum, {&x_arg})[0];
  const AxisSplit s = split(x.shape(), ops::detail::wrap_dim("sum", dim, x.dim()));
  Tensor out = reduce_raw(ReduceOp::sum, x, s, keepdim ? s.kept : s.dropped);
  record<SumNode>(out, {&x}, x.shape(), s.kept, 1.0f, x.dtype());
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

Tensor mean(const Tensor& x_arg, std::int64_t dim, bool keepdim) {
  runtime::detail::OpScope prof(runtime::OpKind::mean);
  ops::detail::require_defined("mean", x_arg, "x");
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::mean, {&x_arg})[0];
  const AxisSplit s = split(x.shape(), ops::detail::wrap_dim("mean", dim, x.dim()));
  Tensor out = reduce_raw(ReduceOp::mean, x, s, keepdim ? s.kept : s.dropped);
  const float scale = s.n > 0 ? 1.0f / static_cast<float>(s.n) : 0.0f;
  record<SumNode>(out, {&x}, x.shape(), s.kept, scale, x.dtype());
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

Tensor amax(const Tensor& x, std::int64_t dim, bool keepdim) {
  runtime::detail::OpScope prof(runtime::OpKind::amax);
  ops::detail::require_defined("amax", x, "x");
  require_compute_dtype("amax", x.dtype());
  const std::int64_t axis = ops::detail::wrap_dim("amax", dim, x.dim());
  const AxisSplit s = split(x.shape(), axis);
  MIXPREC_CHECK(s.n > 0, ShapeError, "amax", "cannot take the maximum over an empty dimension");
  const Tensor kept = reduce_raw(ReduceOp::max, x, s, s.kept);
  Tensor out = keepdim ? kept : kept.reshape(s.dropped);
  if (runtime::needs_grad({&x})) {
    auto node = std::make_shared<AmaxNode>(x.detach().contiguous(), kept.detach());
    node->axis_ = axis;
    runtime::attach(out, node, {&x});
  }
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

Tensor max_abs(const Tensor& x) {
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::op, "max_abs");
  if (x.defined()) require_compute_dtype("max_abs", x.dtype());
  Tensor out = reduce_all(ReduceOp::amax, x, "max_abs");
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

class NormNode final : public runtime::Node {
 public:
  NormNode(Tensor x, Tensor norm) : x_(std::move(x)), norm_(std::move(norm)) {}
  const char* name() const override { return "norm"; }
  void release_saved() override { x_ = Tensor(); norm_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy) override {
    // d||x||/dx = x / ||x|| (0 at x = 0, the subgradient torch uses). The scale dy / ||x|| stays
    // a one-element tensor; where() selects 0 for a zero norm (the Inf/NaN of 0/0 never leaks).
    const Tensor zero = Tensor::full({}, 0.0f);
    const Tensor norm_is_zero = ops::detail::binary_raw(kernels::BinaryOp::eq, norm_, zero);
    const Tensor scale = where(norm_is_zero, zero, div(dy.to(DType::f32).reshape({}), norm_));
    return {mul(x_, scale).to(x_.dtype())};
  }

 private:
  Tensor x_;
  Tensor norm_;  // ||x|| in f32, rank 0
};

Tensor norm(const Tensor& x_arg) {
  runtime::detail::OpScope prof(runtime::OpKind::norm);
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::norm, {&x_arg})[0];
  Tensor out = reduce_all(ReduceOp::norm2, x, "norm");
  if (runtime::needs_grad({&x})) {
    runtime::attach(out, std::make_shared<NormNode>(x.detach(), out.detach().to(DType::f32).reshape({})),
                     {&x});
  }
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

}  // namespace mixprec
