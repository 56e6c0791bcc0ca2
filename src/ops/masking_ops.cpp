// masked_fill (with its autograd node) and causal_mask.
#include "mixprec/ops/masking.h"

#include <vector>

#include "kernels/masked_fill.h"
#include "kernels/scan.h"
#include "mixprec/runtime/autocast.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::record;

/// out = mask != 0 ? value : x, x contiguous with the output's shape, mask broadcast to it.
Tensor masked_fill_raw(const Tensor& x_in, const Tensor& mask, float value) {
  const Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const Shape ms = ops::detail::broadcast_strides(mask, x.shape());
  kernels::masked_fill(x.shape(), x.data_ptr(), x.dtype(), {mask.data_ptr(), mask.dtype(), ms},
                       value, out.data_ptr());
  return out;
}

// The gradient passes where the mask kept x and is zero where it filled: the same selection
// with value 0 on the output gradient.
class MaskedFillNode final : public runtime::Node {
 public:
  explicit MaskedFillNode(Tensor mask) : mask_(std::move(mask)) {}
  const char* name() const override { return "masked_fill"; }
  void release_saved() override { mask_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy) override {
    return {masked_fill_raw(dy, mask_, 0.0f)};
  }

 private:
  Tensor mask_;
};

}  // namespace

Tensor masked_fill(const Tensor& x_arg, const Tensor& mask, float value) {
  const char* op = "masked_fill";
  runtime::detail::OpScope prof(runtime::OpKind::masked_fill);
  ops::detail::require_defined(op, x_arg, "x");
  ops::detail::require_defined(op, mask, "mask");
  require_compute_dtype(op, mask.dtype());
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::masked_fill, {&x_arg})[0];
  const Shape b = ops::detail::broadcast_shapes(op, x.shape(), mask.shape());
  MIXPREC_CHECK(b == x.shape(), ShapeError, op,
                "mask " << to_string(mask.shape()) << " does not broadcast to x's shape "
                        << to_string(x.shape()));
  Tensor out = masked_fill_raw(x, mask, value);
  record<MaskedFillNode>(out, {&x}, mask.detach());
  prof.done(out, {&x, &mask}, 0.0);  // a selection: no arithmetic
  return out;
}

Tensor causal_mask(std::int64_t t, DType dtype) {
  MIXPREC_CHECK(t >= 0, ValueError, "causal_mask", "needs t >= 0, got " << t);
  // 1 where j > i, built in tensor memory: the ramp 1..t (a running sum of ones, exact in f32
  // for any t a model uses) as a row and, plus one, as a column; j > i is ramp[j] >= ramp[i] + 1.
  Tensor ramp = Tensor::empty({1, t});
  const Tensor ones = Tensor::full({1, t}, 1.0f);
  kernels::cumsum(ones.data_ptr(), DType::f32, 1, t, ramp.data_ptr(), DType::f32, false);
  Tensor next = Tensor::empty({t, 1});
  kernels::affine(ramp.data_ptr(), DType::f32, next.data_ptr(), DType::f32, t, 1.0f, 1.0f);
  return ops::detail::binary_raw(kernels::BinaryOp::ge, ramp, next, dtype);
}

}  // namespace mixprec
