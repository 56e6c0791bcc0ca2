#include "runtime/grad_util.h"

#include <span>

namespace mixprec::runtime::detail {

DType promote(DType a, DType b) { return a == b ? a : DType::f32; }

kernels::StridedInput strided(const Tensor& t) {
  return {t.data_ptr(), t.dtype(), std::span<const std::int64_t>(t.strides())};
}

Tensor materialize(const Tensor& t, DType dtype, MemoryCategory category) {
  Tensor out = Tensor::empty(t.shape(), dtype, category);
  const Shape out_strides = out.strides();
  kernels::copy(t.shape(), strided(t), {out.data_ptr(), dtype, out_strides});
  return out;
}

void add_into(Tensor& dst, const Tensor& src) {
  MIXPREC_ASSERT(dst.is_contiguous() && dst.shape() == src.shape());
  kernels::binary(kernels::BinaryOp::add, dst.shape(), strided(dst), strided(src), dst.data_ptr(),
                  dst.dtype());
  dst.bump_version();
}

Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  const DType dtype = promote(a.dtype(), b.dtype());
  Tensor out = Tensor::empty(a.shape(), dtype, MemoryCategory::gradient);
  kernels::binary(kernels::BinaryOp::add, a.shape(), strided(a), strided(b), out.data_ptr(), dtype);
  return out;
}

}  // namespace mixprec::runtime::detail
