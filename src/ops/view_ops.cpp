// Views (reshape, transpose, permute, slice) and copies (contiguous, clone) with autograd.
#include <algorithm>
#include <numeric>

#include "runtime/op_scope.h"
#include "ops/op_util.h"

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

class ReshapeNode final : public autograd::Node {
 public:
  explicit ReshapeNode(Shape in_shape) : in_shape_(std::move(in_shape)) {}
  const char* name() const override { return "reshape"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy.reshape(in_shape_)}; }

 private:
  Shape in_shape_;
};

class PermuteNode final : public autograd::Node {
 public:
  explicit PermuteNode(Shape inverse) : inverse_(std::move(inverse)) {}
  const char* name() const override { return "permute"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy.permute(inverse_)}; }

 private:
  Shape inverse_;
};

class SliceNode final : public autograd::Node {
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

class IdentityNode final : public autograd::Node {
 public:
  const char* name() const override { return "contiguous"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy}; }
};

}  // namespace

Tensor Tensor::reshape(const Shape& new_shape_in) const {
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
    MIXPREC_CHECK(known != 0 && numel() % known == 0, ShapeError, op,
                  "cannot reshape " << mixprec::to_string(shape()) << " into " << mixprec::to_string(new_shape_in));
    new_shape[static_cast<std::size_t>(infer)] = numel() / known;
  }
  MIXPREC_CHECK(mixprec::numel(new_shape) == numel(), ShapeError, op,
                "cannot reshape " << mixprec::to_string(shape()) << " (" << numel() << " elements) into "
                                  << mixprec::to_string(new_shape_in));
  if (new_shape == shape()) return *this;
  const Tensor src = is_contiguous() ? *this : contiguous();
  Tensor out = make_view(src, new_shape, contiguous_strides(new_shape), src.offset());
  record<ReshapeNode>(out, {this}, shape());
  return out;
}

Tensor Tensor::permute(const Shape& dims) const {
  const std::int64_t nd = dim();
  MIXPREC_CHECK(static_cast<std::int64_t>(dims.size()) == nd, ShapeError, "permute",
                "got " << dims.size() << " dimensions for a " << nd << "-d tensor");
  Shape shape_out(dims.size()), strides_out(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(ops::detail::wrap_dim("permute", dims[i], nd));
    MIXPREC_CHECK(!seen[d], ShapeError, "permute", "dimension " << d << " repeated in " << mixprec::to_string(dims));
    seen[d] = true;
    shape_out[i] = shape()[d];
    strides_out[i] = strides()[d];
    inverse[d] = static_cast<std::int64_t>(i);
  }
  Tensor out = make_view(*this, shape_out, strides_out, offset());
  record<PermuteNode>(out, {this}, inverse);
  return out;
}

Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const {
  const std::int64_t nd = dim();
  Shape dims(static_cast<std::size_t>(nd));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<std::size_t>(ops::detail::wrap_dim("transpose", d0, nd))],
            dims[static_cast<std::size_t>(ops::detail::wrap_dim("transpose", d1, nd))]);
  return permute(dims);
}

Tensor Tensor::slice(std::int64_t dim_in, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  const std::int64_t d = ops::detail::wrap_dim("slice", dim_in, dim());
  const std::int64_t len = shape()[static_cast<std::size_t>(d)];
  MIXPREC_CHECK(step > 0, ValueError, "slice", "step must be positive, got " << step);
  if (start < 0) start += len;
  if (end < 0) end += len;
  start = std::clamp<std::int64_t>(start, 0, len);
  end = std::clamp<std::int64_t>(end, start, len);
  Shape shape_out = shape(), strides_out = strides();
  shape_out[static_cast<std::size_t>(d)] = (end - start + step - 1) / step;
  strides_out[static_cast<std::size_t>(d)] *= step;
  Tensor out = make_view(*this, shape_out, strides_out, offset() + start * strides()[static_cast<std::size_t>(d)]);
  record<SliceNode>(out, {this}, shape(), gradient_dtype(dtype()), d, start, end, step);
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  diagnostics::detail::OpScope prof(diagnostics::detail::ScopeKind::op, "contiguous");
  Tensor out = ops::detail::materialize(*this, dtype(), MemoryCategory::activation);
  record<IdentityNode>(out, {this});
  prof.done(out, {this}, 0.0);  // a copy: no arithmetic
  return out;
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::contiguous) return contiguous();
  if (memory_format() == format) return *this;
  if (is_contiguous(format)) {  // laid out so already: restride the size-1 dimensions only
    Tensor out = make_view(*this, shape(), memory_format_strides(shape(), format), offset());
    record<IdentityNode>(out, {this});
    return out;
  }
  diagnostics::detail::OpScope prof(diagnostics::detail::ScopeKind::op, "contiguous");
  Tensor out = ops::detail::materialize(*this, dtype(), MemoryCategory::activation, format);
  record<IdentityNode>(out, {this});
  prof.done(out, {this}, 0.0);  // a copy: no arithmetic
  return out;
}

Tensor Tensor::clone() const {
  diagnostics::detail::OpScope prof(diagnostics::detail::ScopeKind::op, "clone");
  Tensor out = ops::detail::materialize(*this, dtype(), category());
  prof.done(out, {this}, 0.0);  // a copy: no arithmetic
  return out;
}

}  // namespace mixprec
