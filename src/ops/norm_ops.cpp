// batch_norm and layer_norm with autograd; the loops run in kernels/norm.h. Per-channel and
// per-feature parameters are handed to the kernels as f32 copies on the device (they are small),
// so weights of any dtype work and the affine step always computes in f32; statistics and
// parameter gradients are f32 tensors beside them: nothing crosses to the host.
#include <cmath>
#include <vector>

#include "kernels/ema.h"
#include "kernels/norm.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/ops/normalization.h"
#include "runtime/op_scope.h"
#include "ops/norm_util.h"
#include "ops/op_util.h"
#include "runtime/grad_util.h"

namespace mixprec {
namespace {

using ops::detail::data_or_null;
using ops::detail::f32_buffer;
using ops::detail::param_grad;
using ops::detail::ParamInfo;
using ops::detail::record;

/// What follows batch norm inside the op: nothing (batch_norm), or ReLU with or without a
/// residual added first (batch_norm_relu).
struct BatchNormEpilogue {
  bool relu = false;
  bool residual = false;
};

class BatchNormNode final : public runtime::Node {
 public:
  BatchNormNode(Tensor x, kernels::BatchNormDims dims, Tensor mean, Tensor var, Tensor weight,
                ParamInfo w, ParamInfo b, float eps, bool training, BatchNormEpilogue epilogue,
                Tensor relu_y)
      : x_(std::move(x)), dims_(dims), mean_(std::move(mean)), var_(std::move(var)),
        weight_(std::move(weight)), w_(std::move(w)), b_(std::move(b)), eps_(eps),
        training_(training), epilogue_(epilogue), relu_y_(std::move(relu_y)) {}
  const char* name() const override {
    if (!epilogue_.relu) return "batch_norm";
    return epilogue_.residual ? "batch_norm_add_relu" : "batch_norm_relu";
  }
  void release_saved() override {
    x_ = Tensor();
    relu_y_ = Tensor();
  }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    // dy and dx in x_'s layout, which dims_ describes (see batch_norm).
    const MemoryFormat format = x_.memory_format();
    const Tensor dy = dy_in.to(x_.dtype()).contiguous(format);
    Tensor dx = next[0].fn ? Tensor::empty(x_.shape(), x_.dtype(), format) : Tensor();
    const Tensor dw = f32_buffer(dims_.c, next[1].fn != nullptr);
    const Tensor db = f32_buffer(dims_.c, next[2].fn != nullptr);
    // The residual's gradient is the gradient the ReLU passes back, which the kernel writes on
    // its way (the add hands the same gradient to both of its operands).
    Tensor dresidual = epilogue_.residual && next[3].fn
                           ? Tensor::empty(x_.shape(), dy.dtype(), format)
                           : Tensor();
    kernels::batch_norm_backward(x_.data_ptr(), x_.dtype(), dy.data_ptr(), dy.dtype(), dims_,
                                 mean_.data<float>(), var_.data<float>(), eps_,
                                 data_or_null(weight_), training_,
                                 dx.defined() ? dx.data_ptr() : nullptr, x_.dtype(),
                                 data_or_null(dw), data_or_null(db),
                                 relu_y_.defined() ? relu_y_.data_ptr() : nullptr,
                                 dresidual.defined() ? dresidual.data_ptr() : nullptr);
    std::vector<Tensor> grads{dx, param_grad(dw, w_.shape, w_.dtype),
                              param_grad(db, b_.shape, b_.dtype)};
    if (epilogue_.residual) grads.push_back(dresidual);
    return grads;
  }

 private:
  Tensor x_;
  kernels::BatchNormDims dims_;
  Tensor mean_, var_, weight_;  // f32 on the device
  ParamInfo w_, b_;
  float eps_;
  bool training_;
  BatchNormEpilogue epilogue_;
  Tensor relu_y_;  // the op's output (detached) when it ends in ReLU: the ReLU's mask
};

/// batch_norm_relu_max_pool2d's node: x, the statistics, the pooled output (the ReLU's mask at
/// each argmax) and the argmax bytes.
class BatchNormPoolNode final : public runtime::Node {
 public:
  BatchNormPoolNode(Tensor x, kernels::Pool2dDesc desc, Tensor mean, Tensor var, Tensor weight,
                    Tensor y, std::shared_ptr<Storage> argmax, ParamInfo w, ParamInfo b,
                    float eps, bool training)
      : x_(std::move(x)), desc_(desc), mean_(std::move(mean)), var_(std::move(var)),
        weight_(std::move(weight)), y_(std::move(y)), argmax_(std::move(argmax)),
        w_(std::move(w)), b_(std::move(b)), eps_(eps), training_(training) {}
  const char* name() const override { return "batch_norm_relu_max_pool2d"; }
  void release_saved() override {
    x_ = Tensor();
    y_ = Tensor();
    argmax_.reset();
  }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const MemoryFormat format = x_.memory_format();
    const Tensor dy = dy_in.to(x_.dtype()).contiguous(format);
    Tensor dx = next[0].fn ? Tensor::empty(x_.shape(), x_.dtype(), format) : Tensor();
    const Tensor dw = f32_buffer(desc_.c, next[1].fn != nullptr);
    const Tensor db = f32_buffer(desc_.c, next[2].fn != nullptr);
    kernels::batch_norm_relu_max_pool2d_backward(
        desc_, x_.data_ptr(), y_.data_ptr(), static_cast<const std::uint8_t*>(argmax_->data()),
        dy.data_ptr(), mean_.data<float>(), var_.data<float>(), eps_, data_or_null(weight_),
        training_, dx.defined() ? dx.data_ptr() : nullptr, data_or_null(dw), data_or_null(db));
    return {dx, param_grad(dw, w_.shape, w_.dtype), param_grad(db, b_.shape, b_.dtype)};
  }

 private:
  Tensor x_;
  kernels::Pool2dDesc desc_;
  Tensor mean_, var_, weight_;  // f32 on the device
  Tensor y_;                    // the op's output, detached
  std::shared_ptr<Storage> argmax_;  // a byte per pooled value, on the device
  ParamInfo w_, b_;
  float eps_;
  bool training_;
};

class LayerNormNode final : public runtime::Node {
 public:
  LayerNormNode(Tensor x, std::int64_t rows, std::int64_t cols, Tensor mean, Tensor rstd,
                Tensor weight, ParamInfo w, ParamInfo b)
      : x_(std::move(x)), rows_(rows), cols_(cols), mean_(std::move(mean)),
        rstd_(std::move(rstd)), weight_(std::move(weight)), w_(std::move(w)), b_(std::move(b)) {}
  const char* name() const override { return "layer_norm"; }
  void release_saved() override { x_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    // The kernel reads dy in its own dtype (the next GEMM's 16-bit input gradient under
    // autocast) and widens it as it loads: no cast, same numbers.
    const Tensor dy = dy_in.contiguous();
    Tensor dx = next[0].fn ? Tensor::empty(x_.shape(), x_.dtype()) : Tensor();
    const Tensor dw = f32_buffer(cols_, next[1].fn != nullptr);
    const Tensor db = f32_buffer(cols_, next[2].fn != nullptr);
    kernels::layer_norm_backward(x_.data_ptr(), x_.dtype(), dy.data_ptr(), dy.dtype(), rows_,
                                 cols_, mean_.data<float>(), rstd_.data<float>(),
                                 data_or_null(weight_), dx.defined() ? dx.data_ptr() : nullptr,
                                 x_.dtype(), data_or_null(dw), data_or_null(db));
    return {dx, param_grad(dw, w_.shape, w_.dtype), param_grad(db, b_.shape, b_.dtype)};
  }

 private:
  Tensor x_;
  std::int64_t rows_, cols_;
  Tensor mean_, rstd_, weight_;  // f32 on the device
  ParamInfo w_, b_;
};

void check_param(const char* op, const Tensor& t, const Shape& shape, const char* what) {
  if (!t.defined()) return;
  MIXPREC_CHECK(t.shape() == shape, ShapeError, op,
                what << " must have shape " << to_string(shape) << ", got "
                     << to_string(t.shape()));
}

}  // namespace

namespace ops::detail {

Tensor param_grad(const std::vector<float>& g, const Shape& shape, DType dtype) {
  return Tensor::from_vector(g, shape, dtype);
}

Tensor f32_copy(const Tensor& t) {
  return t.defined() ? materialize(t.detach(), DType::f32, MemoryCategory::workspace) : Tensor();
}

Tensor f32_buffer(std::int64_t n, bool wanted) {
  return wanted ? Tensor::empty({n}, DType::f32, MemoryCategory::workspace) : Tensor();
}

Tensor param_grad(const Tensor& g, const Shape& shape, DType dtype) {
  if (!g.defined()) return Tensor();
  const Tensor shaped = g.reshape(shape);
  return dtype == DType::f32 ? shaped : materialize(shaped, dtype, MemoryCategory::activation);
}

void check_running(const char* op, const Tensor& t, std::int64_t c, const char* what) {
  if (!t.defined()) return;
  MIXPREC_CHECK(t.dtype() == DType::f32, DTypeError, op,
                what << " must be f32 (running statistics are accumulated in f32), got "
                     << name(t.dtype()) << "; keep the buffer in f32");
  MIXPREC_CHECK(t.shape() == Shape{c}, ShapeError, op,
                what << " must have shape [" << c << "], got " << to_string(t.shape()));
  MIXPREC_CHECK(t.is_contiguous(), ValueError, op, what << " must be contiguous");
}

kernels::BatchNormDims check_batch_norm_args(const char* op, const Tensor& x,
                                             const Tensor& running_mean,
                                             const Tensor& running_var, const Tensor& weight,
                                             const Tensor& bias, bool training, float momentum,
                                             float eps) {
  MIXPREC_CHECK(x.dim() >= 2, ShapeError, op,
                "input must be [N, C] or [N, C, H, W], got " << to_string(x.shape()));
  kernels::BatchNormDims d;
  d.n = x.size(0);
  d.c = x.size(1);
  d.s = 1;
  for (std::int64_t i = 2; i < x.dim(); ++i) d.s *= x.size(i);
  check_param(op, weight, {d.c}, "weight");
  check_param(op, bias, {d.c}, "bias");
  check_running(op, running_mean, d.c, "running_mean");
  check_running(op, running_var, d.c, "running_var");
  MIXPREC_CHECK(training || (running_mean.defined() && running_var.defined()), ValueError, op,
                "eval mode needs running_mean and running_var; pass them or use training mode");
  MIXPREC_CHECK(running_mean.defined() == running_var.defined(), ValueError, op,
                "pass both running_mean and running_var, or neither");
  MIXPREC_CHECK(std::isfinite(momentum) && momentum >= 0.0f && momentum <= 1.0f, ValueError, op,
                "momentum must be in [0, 1], got " << momentum);
  MIXPREC_CHECK(std::isfinite(eps) && eps >= 0.0f, ValueError, op,
                "eps must be finite and >= 0, got " << eps);
  return d;
}

BatchNormInputs prepare_batch_norm(const char* op, const Tensor& x, const Tensor& running_mean,
                                   const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                                   bool training, float momentum, float eps) {
  require_defined(op, x, "x");
  std::vector<Tensor> in = runtime::autocast_inputs(runtime::OpKind::batch_norm, {&x, &weight, &bias});
  BatchNormInputs out{std::move(in[0]), std::move(in[1]), std::move(in[2]), {}};
  out.d = check_batch_norm_args(op, out.x, running_mean, running_var, out.weight, out.bias, training, momentum, eps);
  return out;
}

void update_running(Tensor& running, const Tensor& batch, double factor, float momentum) {
  Tensor target = batch;
  if (factor != 1.0) {
    target = Tensor::empty(batch.shape(), DType::f32, MemoryCategory::workspace);
    kernels::affine(batch.data_ptr(), DType::f32, target.data_ptr(), DType::f32, batch.numel(),
                    static_cast<float>(factor), 0.0f);
  }
  kernels::ema_update(target.data_ptr(), DType::f32, running.data<float>(), running.numel(),
                      momentum);
  running.bump_version();
}

}  // namespace ops::detail

namespace {

/// batch_norm, and batch_norm_relu with its epilogue fused (residual: the residual, already
/// in x's dtype, shape and layout; null without one).
Tensor batch_norm_impl(const char* op, const Tensor& x_arg, Tensor& running_mean,
                       Tensor& running_var, const Tensor& weight_arg, const Tensor& bias_arg,
                       bool training, float momentum, float eps, BatchNormEpilogue epilogue,
                       const Tensor* residual) {
  runtime::detail::OpScope prof(runtime::OpKind::batch_norm);
  const ops::detail::BatchNormInputs in = ops::detail::prepare_batch_norm(
      op, x_arg, running_mean, running_var, weight_arg, bias_arg, training, momentum, eps);
  const Tensor& x = in.x;
  const Tensor& weight = in.weight;
  const Tensor& bias = in.bias;
  MIXPREC_CHECK(!training || in.d.n * in.d.s > 1, ValueError, op,
                "Expected more than 1 value per channel when training, got input size "
                    << to_string(x.shape()) << "; use a batch of at least 2 or eval mode");
  // Channels-last [N, C, H, W] is [N*H*W, C] in memory: the kernels' [n, c, s = 1] layout, so
  // one set of kernels serves both and the output keeps the input's layout.
  const MemoryFormat format = x.memory_format();
  kernels::BatchNormDims d = in.d;
  if (format == MemoryFormat::channels_last) d = {in.d.n * in.d.s, in.d.c, 1};

  const Tensor xc = x.detach().contiguous(format);
  const Tensor w = ops::detail::f32_copy(weight), b = ops::detail::f32_copy(bias);
  // Training: the kernel writes the batch statistics here; eval: copies of the running ones.
  const Tensor mean = training ? ops::detail::f32_buffer(d.c) : ops::detail::f32_copy(running_mean);
  const Tensor var = training ? ops::detail::f32_buffer(d.c) : ops::detail::f32_copy(running_var);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), format);
  // The residual in y's layout (a differentiable copy only if it arrives in the other one).
  const Tensor rc = residual != nullptr ? residual->contiguous(format) : Tensor();
  kernels::batch_norm_forward(xc.data_ptr(), xc.dtype(), d, data_or_null(w), data_or_null(b), eps,
                              training, mean.data<float>(), var.data<float>(), y.data_ptr(),
                              y.dtype(), rc.defined() ? rc.data_ptr() : nullptr, epilogue.relu);
  if (training && running_mean.defined()) {
    const double count = static_cast<double>(d.n * d.s);
    ops::detail::update_running(running_mean, mean, 1.0, momentum);
    ops::detail::update_running(running_var, var, count / (count - 1.0), momentum);
  }
  const Tensor relu_y = epilogue.relu ? y.detach() : Tensor();
  if (rc.defined()) {
    record<BatchNormNode>(y, {&x, &weight, &bias, &rc}, xc, d, mean, var, w,
                          ParamInfo::of(weight), ParamInfo::of(bias), eps, training, epilogue,
                          relu_y);
    prof.done(y, {&x, &weight, &bias, &rc});
  } else {
    record<BatchNormNode>(y, {&x, &weight, &bias}, xc, d, mean, var, w, ParamInfo::of(weight),
                          ParamInfo::of(bias), eps, training, epilogue, relu_y);
    prof.done(y, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, Tensor& running_mean, Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, float momentum,
                  float eps) {
  return batch_norm_impl("batch_norm", x, running_mean, running_var, weight, bias, training,
                         momentum, eps, {}, nullptr);
}

Tensor batch_norm_relu(const Tensor& x, Tensor& running_mean, Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, float momentum,
                       float eps, const Tensor& residual) {
  const char* op = "batch_norm_relu";
  ops::detail::require_defined(op, x, "x");
  if (!residual.defined()) {
    return batch_norm_impl(op, x, running_mean, running_var, weight, bias, training, momentum,
                           eps, {.relu = true, .residual = false}, nullptr);
  }
  // batch_norm's output has x's dtype (pass_through), so the add keeps that dtype exactly when
  // the residual has it too; a broadcast or a promoting add runs as the three ops instead.
  if (residual.shape() != x.shape() || residual.dtype() != x.dtype()) {
    return relu(add(batch_norm(x, running_mean, running_var, weight, bias, training, momentum,
                               eps),
                    residual));
  }
  return batch_norm_impl(op, x, running_mean, running_var, weight, bias, training, momentum, eps,
                         {.relu = true, .residual = true}, &residual);
}

Tensor batch_norm_relu_max_pool2d(const Tensor& x_arg, Tensor& running_mean, Tensor& running_var,
                                  const Tensor& weight_arg, const Tensor& bias_arg, bool training,
                                  std::int64_t kernel, float momentum, float eps) {
  const char* op = "batch_norm_relu_max_pool2d";
  runtime::detail::OpScope prof(runtime::OpKind::batch_norm);
  const ops::detail::BatchNormInputs in = ops::detail::prepare_batch_norm(
      op, x_arg, running_mean, running_var, weight_arg, bias_arg, training, momentum, eps);
  const Tensor& x = in.x;
  MIXPREC_CHECK(x.dim() == 4, ShapeError, op, "input must be [N, C, H, W], got " << to_string(x.shape()));
  MIXPREC_CHECK(!training || in.d.n * in.d.s > 1, ValueError, op,
                "Expected more than 1 value per channel when training, got input size "
                    << to_string(x.shape()) << "; use a batch of at least 2 or eval mode");
  const MemoryFormat format = x.memory_format();
  kernels::Pool2dDesc d;
  d.n = x.size(0), d.c = x.size(1), d.h = x.size(2), d.w = x.size(3);
  d.kernel = d.stride = kernel;
  d.dtype = x.dtype();
  d.channels_last = format == MemoryFormat::channels_last;
  kernels::detail::check_batch_norm_pool_args(op, d, eps, training);
  const Tensor xc = x.detach().contiguous(format);
  const Tensor w = ops::detail::f32_copy(in.weight), b = ops::detail::f32_copy(in.bias);
  const Tensor mean = training ? ops::detail::f32_buffer(d.c) : ops::detail::f32_copy(running_mean);
  const Tensor var = training ? ops::detail::f32_buffer(d.c) : ops::detail::f32_copy(running_var);
  Tensor y = Tensor::empty({d.n, d.c, d.out_h(), d.out_w()}, x.dtype(), format);
  // The argmax only when a backward will read it (a byte per pooled value).
  const bool backward = runtime::needs_grad({&x, &in.weight, &in.bias});
  std::shared_ptr<Storage> argmax =
      backward ? std::make_shared<Storage>(static_cast<std::size_t>(y.numel()),
                                           MemoryCategory::activation)
               : nullptr;
  kernels::batch_norm_relu_max_pool2d(
      d, xc.data_ptr(), data_or_null(w), data_or_null(b), eps, training, mean.data<float>(),
      var.data<float>(), y.data_ptr(),
      argmax != nullptr ? static_cast<std::uint8_t*>(argmax->data()) : nullptr);
  if (training && running_mean.defined()) {
    const double count = static_cast<double>(d.n * d.h * d.w);
    ops::detail::update_running(running_mean, mean, 1.0, momentum);
    ops::detail::update_running(running_var, var, count / (count - 1.0), momentum);
  }
  if (backward) {
    record<BatchNormPoolNode>(y, {&x, &in.weight, &in.bias}, xc, d, mean, var, w, y.detach(),
                              std::move(argmax), ParamInfo::of(in.weight), ParamInfo::of(in.bias),
                              eps, training);
  }
  prof.done(y, {&x, &in.weight, &in.bias});
  return y;
}

namespace {

/// A layer norm's shape checks and its f32 parameters, shared by layer_norm and add_layer_norm.
struct LayerNormPlan {
  std::int64_t rows = 0, cols = 0;
  Tensor w, b;  // f32 copies of weight and bias (undefined where absent)
};

LayerNormPlan plan_layer_norm(const char* op, const Shape& x_shape, std::int64_t normalized_dims,
                              const Tensor& weight, const Tensor& bias, float eps) {
  const auto dims = static_cast<std::int64_t>(x_shape.size());
  MIXPREC_CHECK(normalized_dims >= 1 && normalized_dims <= dims, ValueError, op,
                "normalized_dims must be in [1, " << dims << "] for input "
                                                  << to_string(x_shape) << ", got "
                                                  << normalized_dims);
  const Shape norm_shape(x_shape.end() - normalized_dims, x_shape.end());
  LayerNormPlan p;
  p.cols = numel(norm_shape);
  MIXPREC_CHECK(p.cols > 0, ShapeError, op,
                "the normalized dimensions " << to_string(norm_shape) << " are empty");
  check_param(op, weight, norm_shape, "weight");
  check_param(op, bias, norm_shape, "bias");
  MIXPREC_CHECK(std::isfinite(eps) && eps >= 0.0f, ValueError, op,
                "eps must be finite and >= 0, got " << eps);
  p.rows = numel(x_shape) / p.cols;
  p.w = ops::detail::f32_copy(weight);
  p.b = ops::detail::f32_copy(bias);
  return p;
}

/// fp32_to_lower: statistics and normalisation in f32 from any input dtype; under autocast the
/// output is stored in the region's dtype, rounded once, as the next GEMM would cast it.
DType layer_norm_output_dtype(DType x_dtype) {
  return runtime::autocast_enabled() ? runtime::autocast_dtype() : x_dtype;
}

}  // namespace

Tensor layer_norm(const Tensor& x_arg, std::int64_t normalized_dims, const Tensor& weight_arg,
                  const Tensor& bias_arg, float eps) {
  const char* op = "layer_norm";
  runtime::detail::OpScope prof(runtime::OpKind::layer_norm);
  ops::detail::require_defined(op, x_arg, "x");
  const std::vector<Tensor> in =
      runtime::autocast_inputs(runtime::OpKind::layer_norm, {&x_arg, &weight_arg, &bias_arg});
  const Tensor& x = in[0];
  const Tensor& weight = in[1];
  const Tensor& bias = in[2];
  const LayerNormPlan p = plan_layer_norm(op, x.shape(), normalized_dims, weight, bias, eps);
  const Tensor xc = x.detach().contiguous();
  const Tensor mean = f32_buffer(p.rows), rstd = f32_buffer(p.rows);
  Tensor y = Tensor::empty(x.shape(), layer_norm_output_dtype(x.dtype()));
  kernels::layer_norm_forward(xc.data_ptr(), xc.dtype(), p.rows, p.cols, data_or_null(p.w),
                              data_or_null(p.b), eps, y.data_ptr(), y.dtype(), mean.data<float>(),
                              rstd.data<float>());
  record<LayerNormNode>(y, {&x, &weight, &bias}, xc, p.rows, p.cols, mean, rstd, p.w,
                        ParamInfo::of(weight), ParamInfo::of(bias));
  prof.done(y, {&x, &weight, &bias});
  return y;
}

ResidualNorm add_layer_norm(const Tensor& x_arg, const Tensor& delta_arg,
                            std::int64_t normalized_dims, const Tensor& weight_arg,
                            const Tensor& bias_arg, float eps) {
  const char* op = "add_layer_norm";
  ops::detail::require_defined(op, x_arg, "x");
  ops::detail::require_defined(op, delta_arg, "delta");
  if (x_arg.shape() != delta_arg.shape()) {
    // Broadcasting: the add and the norm apart (the same results, one more pass).
    Tensor sum = add(x_arg, delta_arg);
    return {sum, layer_norm(sum, normalized_dims, weight_arg, bias_arg, eps)};
  }
  runtime::detail::OpScope prof(runtime::OpKind::layer_norm);
  require_compute_dtype(op, x_arg.dtype());
  require_compute_dtype(op, delta_arg.dtype());
  const std::vector<Tensor> in =
      runtime::autocast_inputs(runtime::OpKind::layer_norm, {&weight_arg, &bias_arg});
  const Tensor& weight = in[0];
  const Tensor& bias = in[1];
  const LayerNormPlan p = plan_layer_norm(op, x_arg.shape(), normalized_dims, weight, bias, eps);
  // The add's dtype: the wider operand's, as add() gives with or without autocast (the kernel
  // widens a 16-bit delta exactly as it loads it).
  const DType sum_dtype = runtime::detail::promote(x_arg.dtype(), delta_arg.dtype());
  const Tensor xc = x_arg.detach().contiguous(), dc = delta_arg.detach().contiguous();
  Tensor sum = Tensor::empty(x_arg.shape(), sum_dtype);
  Tensor y = Tensor::empty(x_arg.shape(), layer_norm_output_dtype(sum_dtype));
  const Tensor mean = f32_buffer(p.rows), rstd = f32_buffer(p.rows);
  kernels::add_layer_norm_forward(xc.data_ptr(), xc.dtype(), dc.data_ptr(), dc.dtype(), p.rows,
                                  p.cols, data_or_null(p.w), data_or_null(p.b), eps,
                                  sum.data_ptr(), sum_dtype, y.data_ptr(), y.dtype(),
                                  mean.data<float>(), rstd.data<float>());
  ops::detail::record_binary(kernels::BinaryOp::add, sum, x_arg, delta_arg);  // add()'s node
  record<LayerNormNode>(y, {&sum, &weight, &bias}, sum.detach(), p.rows, p.cols, mean, rstd,
                        p.w, ParamInfo::of(weight), ParamInfo::of(bias));
  prof.done(y, {&x_arg, &delta_arg, &weight, &bias});
  return {sum, y};
}

}  // namespace mixprec
