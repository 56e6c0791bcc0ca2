#include "ops/op_util.h"

#include "kernels/reduce.h"
#include "mixprec/core/transfer.h"

namespace mixprec::ops::detail {

void require_defined(const char* op, const Tensor& t, const char* arg) {
  MIXPREC_CHECK(t.defined(), StateError, op,
                "argument '" << arg << "' is an undefined tensor (default-constructed or "
                             "moved-from); pass a tensor that holds data");
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t nd = std::max(a.size(), b.size());
  Shape out(nd);
  for (std::size_t i = 0; i < nd; ++i) {
    const std::int64_t da = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    const std::int64_t db = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    MIXPREC_CHECK(da == db || da == 1 || db == 1, ShapeError, op,
                  "shapes " << to_string(a) << " and " << to_string(b)
                            << " cannot be broadcast together (dimension " << i << ": " << da
                            << " vs " << db << ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const std::size_t nd = shape.size();
  const std::size_t td = t.shape().size();
  Shape strides(nd, 0);
  for (std::size_t i = 0; i < td; ++i) {
    const std::size_t o = nd - td + i;
    strides[o] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return strides;
}

std::shared_ptr<Storage> upload_indices(const std::vector<std::int64_t>& indices,
                                        const char* why) {
  const std::size_t bytes = indices.size() * sizeof(std::int64_t);
  auto s = std::make_shared<Storage>(bytes, MemoryCategory::workspace);
  const TransferReason reason(why);
  upload(s->data(), indices.data(), bytes, s->device());
  return s;
}

MemoryFormat output_format(const Shape& shape, const Tensor& a, const Tensor& b) {
  for (const Tensor* t : {&a, &b}) {
    if (t->shape() == shape && t->memory_format() == MemoryFormat::channels_last) {
      return MemoryFormat::channels_last;
    }
  }
  return MemoryFormat::contiguous;
}

Tensor binary_raw(kernels::BinaryOp op, const Tensor& a, const Tensor& b) {
  return binary_raw(op, a, b, promote(a.dtype(), b.dtype()));
}

Tensor binary_raw(kernels::BinaryOp op, const Tensor& a, const Tensor& b, DType dtype) {
  const Shape shape = broadcast_shapes(kernels::name(op), a.shape(), b.shape());
  Tensor out = Tensor::empty(shape, dtype, output_format(shape, a, b));
  const Shape sa = broadcast_strides(a, shape);
  const Shape sb = broadcast_strides(b, shape);
  binary_into(op, {a.data_ptr(), a.dtype(), sa}, {b.data_ptr(), b.dtype(), sb}, out);
  return out;
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  Tensor g = grad.is_contiguous() ? grad : materialize(grad, grad.dtype(), MemoryCategory::gradient);
  Shape cur = g.shape();
  const std::size_t lead = cur.size() - shape.size();
  // Reduce every axis that is broadcast: the leading extra ones and those where shape has 1.
  for (std::size_t axis = 0; axis < cur.size(); ++axis) {
    const bool extra = axis < lead;
    if (!extra && !(shape[axis - lead] == 1 && cur[axis] != 1)) continue;
    std::int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < axis; ++i) outer *= cur[i];
    for (std::size_t i = axis + 1; i < cur.size(); ++i) inner *= cur[i];
    Shape next = cur;
    next[axis] = 1;
    Tensor reduced = Tensor::empty(next, g.dtype(), MemoryCategory::gradient);
    kernels::reduce(kernels::ReduceOp::sum, g.data_ptr(), g.dtype(), outer, cur[axis], inner,
                    reduced.data_ptr(), g.dtype());
    g = reduced;
    cur = next;
  }
  return g.reshape(shape);
}

std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t nd) {
  MIXPREC_CHECK(dim >= -nd && dim < nd, ValueError, op,
                "dimension " << dim << " is out of range for a " << nd << "-d tensor");
  return dim < 0 ? dim + nd : dim;
}

}  // namespace mixprec::ops::detail#include "mixprec/core/transfer.h"

