// Views (reshape, transpose, permute, slice) and copies (contiguous, clone) with autograd: the
// ops behind Tensor's methods of those names, which call them through tensor/tensor_methods.h.
#include <algorithm>
#include <numeric>

#include "runtime/op_scope.h"
#include "ops/op_util.h"
#include "tensor/tensor_methods.h"

namespace mixprec {
namespace {

using ops::detail::record;

Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset) {
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = base.impl().storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

class ReshapeNode final : public runtime::Node {
 public:
  explicit ReshapeNode(Shape in_shape) : in_shape_(std::move(in_shape)) {}
  const char* name() const override { return "reshape"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy.reshape(in_shape_)}; }

 private:
  Shape in_shape_;
};

class PermuteNode final : public runtime::Node {
 public:
  explicit PermuteNode(Shape inverse) : inverse_(std::move(inverse)) {}
  const char* name() const override { return "permute"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy.permute(inverse_)}; }

 private:
  Shape inverse_;
};

class SliceNode final : public runtime::Node {
 public:
  SliceNode(Shape in_shape, DType dtype, std::int64_t dim, std::int64_t start, std::int64_t end,
            std::int64_t step)
      : in_shape_(std::move(in_shape)), dtype_(dtype), dim_(dim), start_(start), end_(end),
        step_(step) {}
  const char* name() const override { return "slice"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor dx = Tensor::zeros(in_shape_, dtype_);
    const Tensor window = dx.slice(dim_, start_, end_, step_);
    kernels::copy(window.shape(), ops::detail::strided(dy),
                  {window.data_ptr(), window.dtype(), window.strides()});
    return {dx};
  }

 private:
  Shape in_shape_;
  DType dtype_;
  std::int64_t dim_, start_, end_, step_;
};

class IdentityNode final : public runtime::Node {
 public:
  const char* name() const override { return "contiguous"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy}; }
};

Tensor reshape_op(const Tensor& self, const Shape& new_shape_in) {
  const char* op = "reshape";
  Shape new_shape = new_shape_in;
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < new_shape.size(); ++i) {
    if (new_shape[i] == -1) {
      MIXPREC_CHECK(infer < 0, ShapeError, op, "only one dimension can be -1 in " << mixprec::to_string(new_shape_in));
      infer = static_cast<int>(i);
    } else {
      MIXPREC_CHECK(new_shape[i] >= 0, ShapeError, op, "negative dimension in " << mixprec::to_string(new_shape_in));
      known *= new_shape[i];
    }
  }
  if (infer >= 0) {
    MIXPREC_CHECK(known != 0 && self.numel() % known == 0, ShapeError, op,
                  "cannot reshape " << mixprec::to_string(self.shape()) << " into " << mixprec::to_string(new_shape_in));
    new_shape[static_cast<std::size_t>(infer)] = self.numel() / known;
  }
  MIXPREC_CHECK(mixprec::numel(new_shape) == self.numel(), ShapeError, op,
                "cannot reshape " << mixprec::to_string(self.shape()) << " (" << self.numel() << " elements) into "
                                  << mixprec::to_string(new_shape_in));
  if (new_shape == self.shape()) return self;
  const Tensor src = self.is_contiguous() ? self : self.contiguous();
  Tensor out = make_view(src, new_shape, contiguous_strides(new_shape), src.offset());
  record<ReshapeNode>(out, {&self}, self.shape());
  return out;
}

Tensor permute_op(const Tensor& self, const Shape& dims) {
  const std::int64_t nd = self.dim();
  MIXPREC_CHECK(static_cast<std::int64_t>(dims.size()) == nd, ShapeError, "permute",
                "got " << dims.size() << " dimensions for a " << nd << "-d tensor");
  Shape shape_out(dims.size()), strides_out(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(ops::detail::wrap_dim("permute", dims[i], nd));
    MIXPREC_CHECK(!seen[d], ShapeError, "permute", "dimension " << d << " repeated in " << mixprec::to_string(dims));
    seen[d] = true;
    shape_out[i] = self.shape()[d];
    strides_out[i] = self.strides()[d];
    inverse[d] = static_cast<std::int64_t>(i);
  }
  Tensor out = make_view(self, shape_out, strides_out, self.offset());
  record<PermuteNode>(out, {&self}, inverse);
  return out;
}

Tensor transpose_op(const Tensor& self, std::int64_t d0, std::int64_t d1) {
  const std::int64_t nd = self.dim();
  Shape dims(static_cast<std::size_t>(nd));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<std::size_t>(ops::detail::wrap_dim("transpose", d0, nd))],
            dims[static_cast<std::size_t>(ops::detail::wrap_dim("transpose", d1, nd))]);
  return permute_op(self, dims);
}

Tensor slice_op(const Tensor& self, std::int64_t dim_in, std::int64_t start, std::int64_t end,
                std::int64_t step) {
  const std::int64_t d = ops::detail::wrap_dim("slice", dim_in, self.dim());
  const std::int64_t len = self.shape()[static_cast<std::size_t>(d)];
  MIXPREC_CHECK(step > 0, ValueError, "slice", "step must be positive, got " << step);
  if (start < 0) start += len;
  if (end < 0) end += len;
  start = std::clamp<std::int64_t>(start, 0, len);
  end = std::clamp<std::int64_t>(end, start, len);
  Shape shape_out = self.shape(), strides_out = self.strides();
  shape_out[static_cast<std::size_t>(d)] = (end - start + step - 1) / step;
  strides_out[static_cast<std::size_t>(d)] *= step;
  Tensor out = make_view(self, shape_out, strides_out, self.offset() + start * self.strides()[static_cast<std::size_t>(d)]);
  record<SliceNode>(out, {&self}, self.shape(), gradient_dtype(self.dtype()), d, start, end, step);
  return out;
}

Tensor contiguous_as_op(const Tensor& self, MemoryFormat format) {
  if (self.memory_format() == format) return self;
  if (self.is_contiguous(format)) {  // laid out so already: restride the size-1 dimensions only
    Tensor out = make_view(self, self.shape(), memory_format_strides(self.shape(), format), self.offset());
    record<IdentityNode>(out, {&self});
    return out;
  }
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::op, "contiguous");
  Tensor out = ops::detail::materialize(self, self.dtype(), MemoryCategory::activation, format);
  record<IdentityNode>(out, {&self});
  prof.done(out, {&self}, 0.0);  // a copy: no arithmetic
  return out;
}

Tensor contiguous_op(const Tensor& self, MemoryFormat format) {
  if (format != MemoryFormat::contiguous) return contiguous_as_op(self, format);
  if (self.is_contiguous()) return self;
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::op, "contiguous");
  Tensor out = ops::detail::materialize(self, self.dtype(), MemoryCategory::activation);
  record<IdentityNode>(out, {&self});
  prof.done(out, {&self}, 0.0);  // a copy: no arithmetic
  return out;
}

Tensor clone_op(const Tensor& self) {
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::op, "clone");
  Tensor out = ops::detail::materialize(self, self.dtype(), self.category());
  prof.done(out, {&self}, 0.0);  // a copy: no arithmetic
  return out;
}

// Tensor's view and copy methods (tensor/tensor_methods.h), installed while the library loads.
[[maybe_unused]] const bool kViewMethodsInstalled = [] {
  detail::TensorMethodTable& table = detail::tensor_method_table();
  table.reshape = &reshape_op;
  table.transpose = &transpose_op;
  table.permute = &permute_op;
  table.slice = &slice_op;
  table.contiguous = &contiguous_op;
  table.clone = &clone_op;
  return true;
}();

}  // namespace
}  // namespace mixprec
