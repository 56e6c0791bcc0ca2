#include "runtime/grad_util.h"

#include <span>

namespace mixprec::runtime::detail {

DType promote(DType a, DType b) { return a == b ? a : DType::f32; }

kernels::StridedInput strided(const Tensor& t) {
  return {t.data_ptr(), t.dtype(), std::span<const std::int64_t>(t.strides())};
}

Tensor materialize(const Tensor& t, DType dtype, MemoryCategory category, MemoryFormat format) {
  Tensor out = Tensor::empty(t.shape(), dtype, format, category);
  const Shape out_strides = out.strides();
  kernels::copy(t.shape(), strided(t), {out.data_ptr(), dtype, out_strides});
  return out;
}

Shape in_memory_order(std::span<const std::int64_t> v, MemoryFormat format) {
  if (format == MemoryFormat::contiguous) return Shape(v.begin(), v.end());
  MIXPREC_ASSERT(v.size() == 4);
  return {v[0], v[2], v[3], v[1]};
}

void binary_into(kernels::BinaryOp op, const kernels::StridedInput& a,
                 const kernels::StridedInput& b, const Tensor& out) {
  const MemoryFormat format = out.memory_format();
  const Shape shape = in_memory_order(out.shape(), format);
  const Shape sa = in_memory_order(a.strides, format), sb = in_memory_order(b.strides, format);
  kernels::binary(op, shape, {a.data, a.dtype, sa}, {b.data, b.dtype, sb}, out.data_ptr(),
                  out.dtype());
}

void add_into(Tensor& dst, const Tensor& src) {
  MIXPREC_ASSERT(dst.is_contiguous() && dst.shape() == src.shape());
  kernels::binary(kernels::BinaryOp::add, dst.shape(), strided(dst), strided(src), dst.data_ptr(),
                  dst.dtype());
  dst.bump_version();
}

Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  const DType dtype = promote(a.dtype(), b.dtype());
  // Two channels-last gradients (a convnet's residual branches) sum into a channels-last one,
  // which the nodes below read without a transposing copy.
  const MemoryFormat format = a.memory_format() == b.memory_format() ? a.memory_format()
                                                                     : MemoryFormat::contiguous;
  Tensor out = Tensor::empty(a.shape(), dtype, format, MemoryCategory::gradient);
  binary_into(kernels::BinaryOp::add, strided(a), strided(b), out);
  return out;
}

}  // namespace mixprec::runtime::detail
