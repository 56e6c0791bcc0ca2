// max_pool2d, avg_pool2d and global_avg_pool2d with autograd; loops in kernels/cpu/pool.cpp.
#include <memory>
#include <vector>

#include "kernels/conv.h"
#include "mixprec/core/storage.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/ops/conv.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::record;

MemoryFormat format_of(const kernels::Pool2dDesc& d) {
  return d.channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous;
}

class MaxPool2dNode final : public runtime::Node {
 public:
  MaxPool2dNode(const kernels::Pool2dDesc& d, std::shared_ptr<Storage> argmax)
      : d_(d), argmax_(std::move(argmax)) {}
  const char* name() const override { return "max_pool2d"; }
  void release_saved() override { argmax_.reset(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.to(d_.dtype).contiguous(format_of(d_));
    Tensor dx = Tensor::empty({d_.n, d_.c, d_.h, d_.w}, d_.dtype, format_of(d_));
    kernels::max_pool2d_backward(d_, dy.data_ptr(), static_cast<const std::int32_t*>(argmax_->data()),
                                 dx.data_ptr());
    return {dx};
  }

 private:
  kernels::Pool2dDesc d_;
  // Per output: index of the winner in its input plane. A Storage, so it is counted as
  // activation memory and comes from the caching allocator like every saved tensor.
  std::shared_ptr<Storage> argmax_;
};

class AvgPool2dNode final : public runtime::Node {
 public:
  explicit AvgPool2dNode(const kernels::Pool2dDesc& d) : d_(d) {}
  const char* name() const override { return "avg_pool2d"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.to(d_.dtype).contiguous(format_of(d_));
    Tensor dx = Tensor::empty({d_.n, d_.c, d_.h, d_.w}, d_.dtype, format_of(d_));
    kernels::avg_pool2d_backward(d_, dy.data_ptr(), dx.data_ptr());
    return {dx};
  }

 private:
  kernels::Pool2dDesc d_;
};

class GlobalAvgPool2dNode final : public runtime::Node {
 public:
  GlobalAvgPool2dNode(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {}
  const char* name() const override { return "global_avg_pool2d"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.contiguous().to(dtype_);
    Tensor dx = Tensor::empty(shape_, dtype_);
    kernels::global_avg_pool2d_backward(dy.data_ptr(), dtype_, shape_[0] * shape_[1],
                                        shape_[2] * shape_[3], dx.data_ptr());
    return {dx};
  }

 private:
  Shape shape_;
  DType dtype_;
};

void check_nchw(const char* op, const Tensor& x) {
  MIXPREC_CHECK(x.dim() == 4, ShapeError, op,
                "x must be 4-D [N, C, H, W], got " << to_string(x.shape())
                                                   << "; add a batch or channel axis with reshape");
}

kernels::Pool2dDesc pool_desc(const char* op, const Tensor& x, std::int64_t kernel,
                              std::int64_t stride, std::int64_t padding) {
  MIXPREC_CHECK(stride >= 0, ValueError, op,
                "stride must be >= 1 (or 0 for stride = kernel), got " << stride);
  check_nchw(op, x);
  kernels::Pool2dDesc d;
  d.n = x.size(0), d.c = x.size(1), d.h = x.size(2), d.w = x.size(3);
  d.kernel = kernel;
  d.stride = stride == 0 ? kernel : stride;
  d.padding = padding;
  d.dtype = x.dtype();
  d.channels_last = x.memory_format() == MemoryFormat::channels_last;  // kept by the output
  kernels::validate_pool2d(op, d);
  return d;
}

}  // namespace

Tensor max_pool2d(const Tensor& x_arg, std::int64_t kernel, std::int64_t stride,
                  std::int64_t padding) {
  const char* op = "max_pool2d";
  runtime::detail::OpScope prof(runtime::OpKind::max_pool2d);
  ops::detail::require_defined(op, x_arg, "x");
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::max_pool2d, {&x_arg})[0];
  const kernels::Pool2dDesc d = pool_desc(op, x, kernel, stride, padding);
  const Tensor xc = x.detach().contiguous(format_of(d));
  Tensor y = Tensor::empty({d.n, d.c, d.out_h(), d.out_w()}, d.dtype, format_of(d));
  const bool grad = runtime::needs_grad({&x});
  std::shared_ptr<Storage> argmax;
  if (grad) {
    argmax = std::make_shared<Storage>(static_cast<std::size_t>(y.numel()) * sizeof(std::int32_t),
                                       MemoryCategory::activation);
  }
  kernels::max_pool2d(d, xc.data_ptr(), y.data_ptr(),
                      grad ? static_cast<std::int32_t*>(argmax->data()) : nullptr);
  record<MaxPool2dNode>(y, {&x}, d, std::move(argmax));
  prof.done(y, {&x}, static_cast<double>(y.numel() * d.kernel * d.kernel));  // comparisons
  return y;
}

Tensor avg_pool2d(const Tensor& x_arg, std::int64_t kernel, std::int64_t stride,
                  std::int64_t padding) {
  const char* op = "avg_pool2d";
  runtime::detail::OpScope prof(runtime::OpKind::avg_pool2d);
  ops::detail::require_defined(op, x_arg, "x");
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::avg_pool2d, {&x_arg})[0];
  const kernels::Pool2dDesc d = pool_desc(op, x, kernel, stride, padding);
  const Tensor xc = x.detach().contiguous(format_of(d));
  Tensor y = Tensor::empty({d.n, d.c, d.out_h(), d.out_w()}, d.dtype, format_of(d));
  kernels::avg_pool2d(d, xc.data_ptr(), y.data_ptr());
  record<AvgPool2dNode>(y, {&x}, d);
  prof.done(y, {&x}, static_cast<double>(y.numel() * d.kernel * d.kernel));  // additions
  return y;
}

Tensor global_avg_pool2d(const Tensor& x_arg) {
  const char* op = "global_avg_pool2d";
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::op, op,
                                    static_cast<int>(runtime::OpKind::avg_pool2d));
  ops::detail::require_defined(op, x_arg, "x");
  const Tensor x = runtime::autocast_inputs(runtime::OpKind::avg_pool2d, {&x_arg})[0];
  check_nchw(op, x);
  MIXPREC_CHECK(x.size(2) > 0 && x.size(3) > 0, ShapeError, op,
                "the spatial extent must be positive, got " << to_string(x.shape()));
  // NCHW planes (a channels-last input is copied first: at a network's end the tensor is small,
  // and one kernel keeps one summation order for both layouts).
  const Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty({x.size(0), x.size(1)}, x.dtype());
  kernels::global_avg_pool2d(xc.data_ptr(), x.dtype(), x.size(0) * x.size(1),
                             x.size(2) * x.size(3), y.data_ptr());
  record<GlobalAvgPool2dNode>(y, {&x}, x.shape(), x.dtype());
  prof.done(y, {&x}, static_cast<double>(x.numel()));
  return y;
}

}  // namespace mixprec
