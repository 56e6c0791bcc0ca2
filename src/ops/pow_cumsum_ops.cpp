// pow (scalar exponent: the pow kernel) and cumsum (last dimension: the scan kernel), with
// autograd.
#include <cmath>

#include "kernels/scan.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::record;

// The running sum of x's rows (last dimension) by the scan kernel, in x's dtype.
Tensor running_sum(const Tensor& x, bool reverse) {
  const Tensor c = x.contiguous();
  const std::int64_t cols = c.dim() == 0 ? 1 : c.size(-1);
  const std::int64_t rows = cols > 0 ? c.numel() / cols : 0;
  Tensor y = Tensor::empty(c.shape(), c.dtype());
  kernels::cumsum(c.data_ptr(), c.dtype(), rows, cols, y.data_ptr(), y.dtype(), reverse);
  return y;
}

class PowNode final : public runtime::Node {
 public:
  PowNode(Tensor x, float p) : x_(std::move(x)), p_(p) {}
  const char* name() const override { return "pow"; }
  void release_saved() override { x_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy) override {
    // d x^p / dx = p x^(p-1)
    return {mul(dy, affine(pow(x_, p_ - 1.0f), p_, 0.0f))};
  }

 private:
  Tensor x_;
  float p_;
};

class CumsumNode final : public runtime::Node {
 public:
  const char* name() const override { return "cumsum"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    // The gradient of a running sum is the running sum of dy taken from the end.
    return {running_sum(dy, /*reverse=*/true)};
  }
};

}  // namespace

Tensor pow(const Tensor& x_arg, float exponent) {
  runtime::detail::OpScope prof(runtime::OpKind::pow);
  ops::detail::require_defined("pow", x_arg, "x");
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::pow, {&x_arg})[0];
  // The pow kernel with the exponent as a broadcast f32 scalar: std::pow in f32, rounded once
  // to x's dtype.
  Tensor y = ops::detail::binary_raw(kernels::BinaryOp::pow, x, Tensor::full({}, exponent),
                                     x.dtype());
  record<PowNode>(y, {&x}, x.detach(), exponent);
  prof.done(y, {&x});
  return y;
}

Tensor cumsum(const Tensor& x_arg) {
  runtime::detail::OpScope prof(runtime::OpKind::cumsum);
  ops::detail::require_defined("cumsum", x_arg, "x");
  MIXPREC_CHECK(x_arg.dim() >= 1, ShapeError, "cumsum", "needs at least one dimension");
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::cumsum, {&x_arg})[0];
  Tensor y = running_sum(x, /*reverse=*/false);  // f32 accumulation (kernels/scan.h)
  record<CumsumNode>(y, {&x});
  prof.done(y, {&x});
  return y;
}

Tensor addmm(const Tensor& c_arg, const Tensor& a_arg, const Tensor& b_arg) {
  runtime::detail::OpScope prof(runtime::OpKind::addmm);
  ops::detail::require_defined("addmm", c_arg, "c");
  const std::vector<Tensor> in = runtime::autocast_inputs(runtime::OpKind::addmm, {&c_arg, &a_arg, &b_arg});
  Tensor out = add(in[0], matmul(in[1], in[2]));
  prof.done_composite(out);  // the matmul and the add report the work
  return out;
}

}  // namespace mixprec
