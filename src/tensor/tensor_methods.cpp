// Tensor's op methods, each a call through the table the ops and runtime floors fill while the
// library loads (tensor_methods.h says why).
#include "tensor/tensor_methods.h"

#include "mixprec/core/error.h"

namespace mixprec {
namespace detail {

TensorMethodTable& tensor_method_table() noexcept {
  static TensorMethodTable table;
  return table;
}

}  // namespace detail

namespace {

// The method's entry, or InternalError naming it: only a library whose ops or runtime objects
// were left out of the link (or a call from another library-load initializer) can see a hole.
template <typename Fn>
Fn installed(Fn fn, const char* method) {
  MIXPREC_CHECK(fn != nullptr, InternalError, method,
                "the method's op was not installed: libmixprec was linked without its ops/ or "
                "runtime/ objects, or the call came from a static initializer");
  return fn;
}

}  // namespace

Tensor Tensor::to(DType dtype) const {
  return installed(detail::tensor_method_table().to, "Tensor::to")(*this, dtype);
}

Tensor Tensor::reshape(const Shape& shape) const {
  return installed(detail::tensor_method_table().reshape, "Tensor::reshape")(*this, shape);
}

Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const {
  return installed(detail::tensor_method_table().transpose, "Tensor::transpose")(*this, d0, d1);
}

Tensor Tensor::permute(const Shape& dims) const {
  return installed(detail::tensor_method_table().permute, "Tensor::permute")(*this, dims);
}

Tensor Tensor::slice(std::int64_t dim, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  return installed(detail::tensor_method_table().slice, "Tensor::slice")(*this, dim, start, end,
                                                                          step);
}

Tensor Tensor::contiguous() const { return contiguous(MemoryFormat::contiguous); }

Tensor Tensor::contiguous(MemoryFormat format) const {
  return installed(detail::tensor_method_table().contiguous, "Tensor::contiguous")(*this, format);
}

Tensor Tensor::clone() const {
  return installed(detail::tensor_method_table().clone, "Tensor::clone")(*this);
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  installed(detail::tensor_method_table().backward, "Tensor::backward")(*this, gradient,
                                                                       retain_graph);
}

}  // namespace mixprec
