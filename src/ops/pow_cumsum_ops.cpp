// pow (scalar exponent) and cumsum (last dimension): small ops whose kernels are plain loops in
// f32, with autograd.
#include <cmath>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "diagnostics/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::record;

// Applies fn(row_in, row_out, cols) in f32 to each row of a contiguous tensor.
template <class Fn>
Tensor map_rows(const Tensor& x, std::int64_t cols, Fn&& fn) {
  const Tensor c = x.contiguous();
  std::vector<float> in = c.to_vector(), out(in.size());
  const std::int64_t rows = cols > 0 ? static_cast<std::int64_t>(in.size()) / cols : 0;
  for (std::int64_t r = 0; r < rows; ++r) fn(in.data() + r * cols, out.data() + r * cols, cols);
  return Tensor::from_vector(out, x.shape(), x.dtype());
}

class PowNode final : public autograd::Node {
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

class CumsumNode final : public autograd::Node {
 public:
  const char* name() const override { return "cumsum"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    // The gradient of a running sum is the running sum of dy taken from the end.
    return {map_rows(dy, dy.size(-1), [](const float* g, float* out, std::int64_t n) {
      float acc = 0.0f;
      for (std::int64_t i = n - 1; i >= 0; --i) out[i] = acc += g[i];
    })};
  }
};

}  // namespace

Tensor pow(const Tensor& x_arg, float exponent) {
  diagnostics::detail::OpScope prof(amp::OpKind::pow);
  ops::detail::require_defined("pow", x_arg, "x");
  const Tensor x = amp::autocast_inputs(amp::OpKind::pow, {&x_arg})[0];
  // The pow kernel with the exponent as a broadcast f32 scalar: std::pow in f32, rounded once
  // to x's dtype.
  Tensor y = ops::detail::binary_raw(kernels::BinaryOp::pow, x, Tensor::full({}, exponent),
                                     x.dtype());
  record<PowNode>(y, {&x}, x.detach(), exponent);
  prof.done(y, {&x});
  return y;
}

Tensor cumsum(const Tensor& x_arg) {
  diagnostics::detail::OpScope prof(amp::OpKind::cumsum);
  ops::detail::require_defined("cumsum", x_arg, "x");
  MIXPREC_CHECK(x_arg.dim() >= 1, ShapeError, "cumsum", "needs at least one dimension");
  const Tensor x = amp::autocast_inputs(amp::OpKind::cumsum, {&x_arg})[0];
  Tensor y = map_rows(x, x.size(-1), [](const float* in, float* out, std::int64_t n) {
    float acc = 0.0f;  // f32 accumulation: a bf16 running sum would stop growing at 256
    for (std::int64_t i = 0; i < n; ++i) out[i] = acc += in[i];
  });
  record<CumsumNode>(y, {&x});
  prof.done(y, {&x});
  return y;
}

Tensor addmm(const Tensor& c_arg, const Tensor& a_arg, const Tensor& b_arg) {
  diagnostics::detail::OpScope prof(amp::OpKind::addmm);
  ops::detail::require_defined("addmm", c_arg, "c");
  const std::vector<Tensor> in = amp::autocast_inputs(amp::OpKind::addmm, {&c_arg, &a_arg, &b_arg});
  Tensor out = add(in[0], matmul(in[1], in[2]));
  prof.done_composite(out);  // the matmul and the add report the work
  return out;
}

}  // namespace mixprec
