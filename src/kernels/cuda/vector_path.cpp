// The vector path's choice (vector_path.h). Plain host code, compiled in every build.
#include "kernels/cuda/vector_path.h"

namespace mixprec::kernels::cuda {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes == 0; }

ElementwisePath typed_path(bool contiguous, std::initializer_list<const void*> pointers) {
  if (!contiguous) return ElementwisePath::strided;
  for (const void* p : pointers) {
    if (!aligned16(p)) return ElementwisePath::contiguous;
  }
  return ElementwisePath::packs;
}

ElementwisePath elementwise_path(bool contiguous, std::initializer_list<VectorOperand> operands) {
  if (!contiguous) return ElementwisePath::strided;
  for (const VectorOperand& o : operands) {
    const bool widened = o.dtype == DType::f32 || o.dtype == DType::bf16 || o.dtype == DType::f16;
    if (!widened || !aligned16(o.data)) return ElementwisePath::contiguous;
  }
  return ElementwisePath::packs;
}

bool row_major_contiguous(std::span<const std::int64_t> shape,
                          std::span<const std::int64_t> strides) {
  if (shape.size() != strides.size()) return false;
  for (std::int64_t extent : shape) {
    if (extent == 0) return true;
  }
  std::int64_t expected = 1;  // the stride of a contiguous dimension here: the extents inside it
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

}  // namespace mixprec::kernels::cuda
