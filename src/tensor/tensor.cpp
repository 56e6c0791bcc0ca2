#include "mixprec/tensor/tensor.h"

#include <cstring>
#include <sstream>

#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/core/transfer.h"
#include "kernels/elementwise.h"

namespace mixprec {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

std::string to_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

const char* name(MemoryFormat format) {
  return format == MemoryFormat::channels_last ? "channels-last" : "contiguous";
}

MemoryFormat parse_memory_format(const std::string& text) {
  if (text == "contiguous") return MemoryFormat::contiguous;
  if (text == "channels-last" || text == "channels_last") return MemoryFormat::channels_last;
  detail::throw_error<ValueError>("memory format", "unknown memory format '" + text +
                                                      "'; use contiguous or channels-last");
}

Shape memory_format_strides(const Shape& shape, MemoryFormat format) {
  if (format == MemoryFormat::contiguous) return contiguous_strides(shape);
  MIXPREC_CHECK(shape.size() == 4, ShapeError, "channels_last",
                "channels-last needs a 4-D [N, C, H, W] shape, got " << to_string(shape));
  const std::int64_t c = shape[1], h = shape[2], w = shape[3];
  return {h * w * c, 1, w * c, c};
}

detail::TensorImpl& Tensor::impl() const {
  MIXPREC_CHECK(impl_ != nullptr, StateError, "Tensor",
                "use of an undefined tensor (default-constructed or moved-from); assign it a "
                "value first");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, MemoryCategory category, Device device) {
  for (std::int64_t s : shape) {
    MIXPREC_CHECK(s >= 0, ShapeError, "Tensor::empty",
                  "negative dimension in shape " << to_string(shape));
  }
  auto impl = std::make_shared<detail::TensorImpl>();
  const std::int64_t n = mixprec::numel(shape);
  impl->storage = std::make_shared<Storage>(static_cast<std::size_t>(n) * size_of(dtype), category,
                                          device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, MemoryFormat format,
                     MemoryCategory category) {
  const Shape strides = memory_format_strides(shape, format);  // ShapeError before allocating
  Tensor t = empty(shape, dtype, category);
  t.impl().strides = strides;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, MemoryCategory category, Device device) {
  Tensor t = empty(shape, dtype, category, device);
  device_memset(t.data_ptr(), 0, t.nbytes(), t.device());  // +0.0: all-zero bits in every dtype
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0f, dtype); }

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (is_storage_only(dtype)) {  // no fill kernel for fp8: round once, repeat the byte
    std::uint8_t byte = 0;
    convert(&value, DType::f32, &byte, dtype, 1);
    device_memset(t.data_ptr(), byte, t.nbytes(), t.device());
    return t;
  }
  kernels::fill(t.data_ptr(), dtype, t.numel(), value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, DType dtype) {
  MIXPREC_CHECK(static_cast<std::int64_t>(values.size()) == mixprec::numel(shape), ShapeError,
                "Tensor::from_vector",
                values.size() << " values do not fill shape " << to_string(shape) << " ("
                              << mixprec::numel(shape) << " elements)");
  Tensor t = empty(shape, dtype);
  if (t.device().is_host()) {
    detail::count_transfer(false, t.nbytes(), t.device());  // the conversion writes in place
    convert(values.data(), DType::f32, t.data_ptr(), dtype, values.size());
    return t;
  }
  std::vector<std::uint8_t> staged(t.nbytes());
  convert(values.data(), DType::f32, staged.data(), dtype, values.size());
  upload(t.data_ptr(), staged.data(), staged.size(), t.device());
  return t;
}

Tensor Tensor::from_bytes(const void* bytes, std::size_t size, const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  MIXPREC_CHECK(size == t.nbytes(), ShapeError, "Tensor::from_bytes",
                size << " bytes do not fill shape " << to_string(shape) << " of " << name(dtype)
                     << " (" << t.nbytes() << " bytes)");
  upload(t.data_ptr(), bytes, size, t.device());
  return t;
}

Tensor Tensor::scalar(float value, DType dtype) { return full({}, value, dtype); }

std::int64_t Tensor::size(std::int64_t d) const {
  const std::int64_t nd = dim();
  MIXPREC_CHECK(d >= -nd && d < nd, ValueError, "Tensor::size",
                "dimension " << d << " out of range for a " << nd << "-d tensor");
  return shape()[static_cast<std::size_t>(d < 0 ? d + nd : d)];
}

bool Tensor::is_contiguous() const {
  const detail::TensorImpl& t = impl();
  std::int64_t expected = 1;
  for (std::size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] == 1) continue;  // the stride of a size-1 dimension never matters
    if (t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::contiguous) return is_contiguous();
  const detail::TensorImpl& t = impl();
  if (t.shape.size() != 4) return false;
  const Shape want = memory_format_strides(t.shape, format);
  for (std::size_t i = 0; i < 4; ++i) {
    if (t.shape[i] != 1 && t.strides[i] != want[i]) return false;
  }
  return true;
}

MemoryFormat Tensor::memory_format() const {
  const detail::TensorImpl& t = impl();
  // Exact strides, size-1 dimensions included: a [N, 1, H, W] or [N, C, 1, 1] tensor is dense
  // in both orders, and only its strides remember which one its producer chose.
  if (t.shape.size() == 4 && t.strides == memory_format_strides(t.shape, MemoryFormat::channels_last) &&
      t.strides != contiguous_strides(t.shape)) {
    return MemoryFormat::channels_last;
  }
  return MemoryFormat::contiguous;
}

void* Tensor::data_ptr() const {
  const detail::TensorImpl& t = impl();
  return static_cast<char*>(t.storage->data()) +
         static_cast<std::size_t>(t.offset) * size_of(t.dtype);
}

std::vector<float> Tensor::to_vector() const {
  const Tensor c = detach().contiguous();
  std::vector<float> out(static_cast<std::size_t>(c.numel()));
  if (c.device().is_host()) {
    detail::count_transfer(true, c.nbytes(), c.device());  // the conversion reads in place
    convert(c.data_ptr(), c.dtype(), out.data(), DType::f32, out.size());
    return out;
  }
  const std::vector<std::uint8_t> bytes = c.to_bytes();
  convert(bytes.data(), c.dtype(), out.data(), DType::f32, out.size());
  return out;
}

std::vector<std::uint8_t> Tensor::to_bytes() const {
  const Tensor c = detach().contiguous();
  std::vector<std::uint8_t> out(c.nbytes());
  download(out.data(), c.data_ptr(), out.size(), c.device());
  return out;
}

Tensor Tensor::to(Device device) const {
  if (this->device() == device) return *this;
  const Tensor c = detach().contiguous();
  Tensor out = empty(c.shape(), c.dtype(), c.category(), device);
  if (c.device().is_host()) {
    upload(out.data_ptr(), c.data_ptr(), c.nbytes(), device);
  } else if (device.is_host()) {
    download(out.data_ptr(), c.data_ptr(), c.nbytes(), c.device());
  } else {  // device to device through the host (no peer copies yet)
    const std::vector<std::uint8_t> bytes = c.to_bytes();
    upload(out.data_ptr(), bytes.data(), bytes.size(), device);
  }
  return out;
}

float Tensor::item() const {
  MIXPREC_CHECK(numel() == 1, ShapeError, "Tensor::item",
                "item() needs a tensor with one element, got shape " << to_string(shape()));
  return to_vector()[0];
}

Tensor& Tensor::set_requires_grad(bool on) {
  MIXPREC_CHECK(is_leaf(), StateError, "Tensor::set_requires_grad",
                "only leaf tensors can change requires_grad; call detach() first");
  // A gradient cannot be accumulated in fp8: keep the leaf in f32 and cast it with to(), whose
  // gradient passes through in f32 (straight-through).
  MIXPREC_CHECK(!on || !is_storage_only(dtype()), DTypeError, "Tensor::set_requires_grad",
                name(dtype()) << " is a storage dtype and cannot require grad; keep the leaf "
                                 "in f32 and cast it with .to(DType::"
                              << name(dtype()) << ") inside the computation");
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const detail::TensorImpl& t = impl();
  return t.grad ? Tensor(t.grad) : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  detail::TensorImpl& t = impl();
  if (!grad.defined()) {
    t.grad.reset();
    return;
  }
  MIXPREC_CHECK(grad.shape() == t.shape, ShapeError, "Tensor::set_grad",
                "gradient shape " << to_string(grad.shape()) << " differs from tensor shape "
                                  << to_string(t.shape));
  MIXPREC_CHECK(!is_storage_only(grad.dtype()), DTypeError, "Tensor::set_grad",
                "a gradient cannot be " << name(grad.dtype())
                                        << " (a storage dtype); pass it in f32, bf16 or f16");
  t.grad = grad.impl_ptr();
}

Tensor Tensor::detach() const {
  auto copy = std::make_shared<detail::TensorImpl>();
  const detail::TensorImpl& t = impl();
  copy->storage = t.storage;
  copy->shape = t.shape;
  copy->strides = t.strides;
  copy->offset = t.offset;
  copy->dtype = t.dtype;
  return Tensor(std::move(copy));
}

}  // namespace mixprec
