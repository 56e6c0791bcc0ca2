// cat, stack and where, with autograd.
#include "mixprec/ops/combine.h"

#include "kernels/masked_fill.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/ops/elementwise.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::record;

// Gradient of cat: the slice of dy that each input contributed.
class CatNode final : public runtime::Node {
 public:
  CatNode(std::int64_t dim, std::vector<std::int64_t> sizes, std::vector<DType> dtypes)
      : dim_(dim), sizes_(std::move(sizes)), dtypes_(std::move(dtypes)) {}
  const char* name() const override { return "cat"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    std::vector<Tensor> grads;
    std::int64_t start = 0;
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
      grads.push_back(ops::detail::materialize(dy.slice(dim_, start, start + sizes_[i]), dtypes_[i],
                                               MemoryCategory::activation));
      start += sizes_[i];
    }
    return grads;
  }

 private:
  std::int64_t dim_;
  std::vector<std::int64_t> sizes_;
  std::vector<DType> dtypes_;
};

DType widest(const std::vector<Tensor>& ts) {
  DType d = ts.front().dtype();
  for (const Tensor& t : ts) d = ops::detail::promote(d, t.dtype());
  return d;
}

class WhereNode final : public runtime::Node {
 public:
  explicit WhereNode(Tensor mask) : mask_(std::move(mask)) {}
  const char* name() const override { return "where"; }
  void release_saved() override { mask_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor da = mul(dy, mask_);
    const Tensor db = mul(dy, affine(mask_, -1.0f, 1.0f));
    return {Tensor(), da, db};
  }

 private:
  Tensor mask_;  // 1 where the condition holds, else 0, in the output dtype
};

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors_arg, std::int64_t dim) {
  const char* op = "cat";
  runtime::detail::OpScope prof(runtime::OpKind::cat);
  MIXPREC_CHECK(!tensors_arg.empty(), ValueError, op, "needs at least one tensor");
  for (const Tensor& t : tensors_arg) ops::detail::require_defined(op, t, "tensors");
  const std::vector<Tensor> tensors = runtime::autocast_inputs(runtime::OpKind::cat, tensors_arg);
  const Tensor& first = tensors.front();
  const std::int64_t d = ops::detail::wrap_dim(op, dim, first.dim());
  Shape out_shape = first.shape();
  out_shape[static_cast<std::size_t>(d)] = 0;
  std::vector<std::int64_t> sizes;
  std::vector<DType> dtypes;
  for (const Tensor& t : tensors) {
    Shape expect = first.shape(), got = t.shape();
    MIXPREC_CHECK(got.size() == expect.size(), ShapeError, op,
                  "all tensors need " << expect.size() << " dimensions, got " << to_string(got));
    expect[static_cast<std::size_t>(d)] = got[static_cast<std::size_t>(d)];
    MIXPREC_CHECK(got == expect, ShapeError, op,
                  "shapes " << to_string(first.shape()) << " and " << to_string(got)
                            << " differ outside dimension " << d);
    sizes.push_back(got[static_cast<std::size_t>(d)]);
    dtypes.push_back(t.dtype());
    out_shape[static_cast<std::size_t>(d)] += got[static_cast<std::size_t>(d)];
  }
  Tensor out = Tensor::empty(out_shape, widest(tensors));
  std::int64_t start = 0;
  for (const Tensor& t : tensors) {
    const Tensor window = out.detach().slice(d, start, start + t.size(d));
    kernels::copy(t.shape(), ops::detail::strided(t), {window.data_ptr(), window.dtype(), window.strides()});
    start += t.size(d);
  }
  if (runtime::grad_enabled()) {
    bool any = false;
    for (const Tensor& t : tensors) any = any || t.requires_grad();
    if (any) {
      auto node = std::make_shared<CatNode>(d, sizes, dtypes);
      // attach() takes an initializer list; link the edges by hand for a variable count.
      std::vector<const Tensor*> ptrs;
      for (const Tensor& t : tensors) ptrs.push_back(&t);
      runtime::attach_all(out, node, ptrs);
    }
  }
  prof.done(out, tensors, 0.0);  // a copy: no arithmetic
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim) {
  runtime::detail::OpScope prof(runtime::OpKind::stack);
  MIXPREC_CHECK(!tensors.empty(), ValueError, "stack", "needs at least one tensor");
  ops::detail::require_defined("stack", tensors.front(), "tensors");
  const std::int64_t nd = tensors.front().dim() + 1;
  const std::int64_t d = ops::detail::wrap_dim("stack", dim, nd);
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) {
    ops::detail::require_defined("stack", t, "tensors");
    MIXPREC_CHECK(t.shape() == tensors.front().shape(), ShapeError, "stack",
                  "all tensors must have the same shape; got " << to_string(tensors.front().shape())
                                                               << " and " << to_string(t.shape()));
    Shape s = t.shape();
    s.insert(s.begin() + d, 1);
    expanded.push_back(t.reshape(s));
  }
  runtime::autocast_inputs(runtime::OpKind::stack, {});  // the policy is applied by cat below
  Tensor out = cat(expanded, d);
  prof.done_composite(out);  // cat reports the work
  return out;
}

Tensor where(const Tensor& condition, const Tensor& a_arg, const Tensor& b_arg) {
  const char* op = "where";
  runtime::detail::OpScope prof(runtime::OpKind::where);
  ops::detail::require_defined(op, condition, "condition");
  ops::detail::require_defined(op, a_arg, "a");
  ops::detail::require_defined(op, b_arg, "b");
  const std::vector<Tensor> in = runtime::autocast_inputs(runtime::OpKind::where, {&a_arg, &b_arg});
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  MIXPREC_CHECK(condition.shape() == a.shape() && a.shape() == b.shape(), ShapeError, op,
                "condition " << to_string(condition.shape()) << ", a " << to_string(a.shape())
                             << " and b " << to_string(b.shape()) << " must have the same shape");
  const DType dtype = ops::detail::promote(a.dtype(), b.dtype());
  // Everything stays in tensor memory: the where kernel selects bits (so Inf/NaN in the
  // unselected branch cannot leak through), and the mask for the backward is 1 - (cond == 0)
  // (NaN counts as true, as in the selection).
  const Tensor c = condition.contiguous();
  const Tensor av = a.dtype() == dtype ? a.contiguous() : a.to(dtype);
  const Tensor bv = b.dtype() == dtype ? b.contiguous() : b.to(dtype);
  Tensor out = Tensor::empty(a.shape(), dtype);
  kernels::where(out.numel(), c.data_ptr(), c.dtype(), av.data_ptr(), bv.data_ptr(), dtype,
                 out.data_ptr());
  if (runtime::needs_grad({&a, &b})) {
    const Tensor is_zero =
        ops::detail::binary_raw(kernels::BinaryOp::eq, c, Tensor::full({}, 0.0f), dtype);
    runtime::attach(out, std::make_shared<WhereNode>(affine(is_zero, -1.0f, 1.0f)),
                     {&condition, &a, &b});
  }
  prof.done(out, {&condition, &a, &b});
  return out;
}

}  // namespace mixprec
