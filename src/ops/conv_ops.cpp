// conv2d with autograd; the convolutions themselves run in kernels::conv2d*.
#include "mixprec/ops/conv.h"

#include "kernels/conv.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/matmul_precision.h"
#include "mixprec/ops/elementwise.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

class Conv2dNode final : public runtime::Node {
 public:
  Conv2dNode(Tensor x, Tensor w, const kernels::Conv2dDesc& d) : x_(std::move(x)), w_(std::move(w)), d_(d) {}
  const char* name() const override { return "conv2d"; }
  void release_saved() override { x_ = Tensor(); w_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.to(d_.dtype).contiguous(format());
    // Each of the data and weight passes costs the forward's 2*N*O*C*kh*kw*Ho*Wo.
    const double pass_flops = 2.0 * static_cast<double>(dy.numel()) * static_cast<double>(d_.c * d_.kh * d_.kw);
    Tensor dx, dw, db;
    if (next[0].fn) {
      dx = Tensor::empty(x_.shape(), d_.dtype, format());
      kernels::conv2d_backward_data(d_, dy.data_ptr(), w_.data_ptr(), dx.data_ptr());
      runtime::detail::add_work(pass_flops, static_cast<double>(dy.nbytes() + w_.nbytes() + dx.nbytes()));
    }
    const bool want_db = d_.has_bias && next.size() > 2 && next[2].fn;
    if (next[1].fn || want_db) {
      // One oneDNN pass yields both; the weight gradient is dropped if only the bias needs one.
      dw = Tensor::empty(w_.shape(), d_.dtype);
      if (want_db) db = Tensor::empty({d_.o}, d_.bias_dtype);
      kernels::conv2d_backward_weights(d_, x_.data_ptr(), dy.data_ptr(), dw.data_ptr(),
                                       want_db ? db.data_ptr() : nullptr);
      runtime::detail::add_work(
          pass_flops + (want_db ? static_cast<double>(dy.numel()) : 0.0),
          static_cast<double>(x_.nbytes() + dy.nbytes() + dw.nbytes() + (want_db ? db.nbytes() : 0)));
      if (!next[1].fn) dw = Tensor();
    }
    if (d_.has_bias) return {dx, dw, db};
    return {dx, dw};
  }

 private:
  MemoryFormat format() const {
    return d_.channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  }

  Tensor x_, w_;
  kernels::Conv2dDesc d_;
};

}  // namespace

Tensor conv2d(const Tensor& x_arg, const Tensor& weight_arg, const Tensor& bias_arg,
              std::int64_t stride, std::int64_t padding) {
  const char* op = "conv2d";
  runtime::detail::OpScope prof(runtime::OpKind::conv2d);
  ops::detail::require_defined(op, x_arg, "x");
  ops::detail::require_defined(op, weight_arg, "weight");
  // The bias stays as given: an f32 bias is added in f32 before the output's single rounding.
  const std::vector<Tensor> cast_in =
      runtime::autocast_inputs(runtime::OpKind::conv2d, {&x_arg, &weight_arg});
  const Tensor& x = cast_in[0];
  const Tensor& weight = cast_in[1];
  Tensor bias = bias_arg;
  if (bias.defined() && runtime::autocast_enabled() && bias.dtype() != x.dtype() &&
      bias.dtype() != DType::f32) {
    bias = cast(bias, DType::f32);  // e.g. a bf16 bias in an f16 region
  }
  MIXPREC_CHECK(x.dim() == 4, ShapeError, op,
                "x must be 4-D [N, C, H, W], got " << to_string(x.shape())
                                                   << "; add a batch or channel axis with reshape");
  MIXPREC_CHECK(weight.dim() == 4, ShapeError, op,
                "weight must be 4-D [O, C, kh, kw], got " << to_string(weight.shape()));
  MIXPREC_CHECK(x.size(1) == weight.size(1), ShapeError, op,
                "x has " << x.size(1) << " channels but weight " << to_string(weight.shape())
                         << " expects " << weight.size(1));
  MIXPREC_CHECK(x.dtype() == weight.dtype(), DTypeError, op,
                "x and weight have different dtypes (" << name(x.dtype()) << " and "
                                                       << name(weight.dtype())
                                                       << "); cast one with .to(), or run under "
                                                          "runtime::Autocast which casts both");
  if (bias.defined()) {
    MIXPREC_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), ShapeError, op,
                  "bias must have shape [" << weight.size(0) << "], got "
                                           << to_string(bias.shape()));
  }
  kernels::Conv2dDesc d;
  d.n = x.size(0), d.c = x.size(1), d.h = x.size(2), d.w = x.size(3);
  d.o = weight.size(0), d.kh = weight.size(2), d.kw = weight.size(3);
  d.stride = stride, d.padding = padding;
  d.dtype = x.dtype();
  d.has_bias = bias.defined();
  d.bias_dtype = bias.defined() ? bias.dtype() : x.dtype();
  // The input's layout is the output's: a channels-last network stays so from layer to layer.
  const MemoryFormat format = x.memory_format();
  d.channels_last = format == MemoryFormat::channels_last;
  // f32 convolutions follow the matmul precision, as the GEMMs do (ops/matmul_ops.cpp).
  d.tf32 = d.dtype == DType::f32 && runtime::matmul_precision() != runtime::MatmulPrecision::highest;
  kernels::validate_conv2d(op, d);

  const Tensor xc = x.detach().contiguous(format);
  const Tensor wc = weight.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = Tensor::empty({d.n, d.o, d.out_h(), d.out_w()}, d.dtype, format);
  kernels::conv2d(d, xc.data_ptr(), wc.data_ptr(), bc.defined() ? bc.data_ptr() : nullptr,
                  y.data_ptr());
  if (runtime::needs_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<Conv2dNode>(xc, wc, d);
    if (bias.defined()) runtime::attach(y, node, {&x, &weight, &bias});
    else runtime::attach(y, node, {&x, &weight});
  }
  // 2*N*O*C*kh*kw*Ho*Wo, plus the bias adds.
  prof.done(y, {&x, &weight, &bias},
            2.0 * static_cast<double>(y.numel()) * static_cast<double>(d.c * d.kh * d.kw) +
                (bias.defined() ? static_cast<double>(y.numel()) : 0.0));
  return y;
}

}  // namespace mixprec
