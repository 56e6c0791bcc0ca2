#pragma once
/// Tensor: a shared handle to a strided view of a Storage, with dtype and autograd state.
/// Copying a Tensor copies the handle (both refer to the same data), like torch.Tensor.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/core/memory.h"
#include "mixprec/core/storage.h"

namespace mixprec {

using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a 0-d shape).
std::int64_t numel(const Shape& shape);
/// Row-major (C-contiguous) strides of a shape, in elements.
Shape contiguous_strides(const Shape& shape);
/// "[2, 3, 4]".
std::string to_string(const Shape& shape);

/// How the elements of a 4-D [N, C, H, W] tensor lie in memory, as PyTorch's memory formats:
/// contiguous (row-major NCHW) or channels_last (NHWC: a pixel's C values side by side, the
/// layout cuDNN's and oneDNN's fastest convolutions read). The shape, indexing and every op's
/// meaning are the same in both; only the strides differ.
enum class MemoryFormat : std::uint8_t { contiguous, channels_last };
/// "contiguous" or "channels-last" (the CLI's spelling).
const char* name(MemoryFormat format);
/// Parses "contiguous" or "channels-last" (also "channels_last"); ValueError naming both.
MemoryFormat parse_memory_format(const std::string& text);
/// The strides of a dense tensor of `shape` in `format`, in elements. channels_last: 4-D only
/// (ShapeError otherwise): [H*W*C, 1, W*C, C].
Shape memory_format_strides(const Shape& shape, MemoryFormat format);

namespace runtime {
class Node;
}

class Tensor;

namespace detail {
/// The state behind a Tensor handle. Not part of the stable API.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  std::int64_t offset = 0;  ///< in elements
  DType dtype = DType::f32;
  // Autograd state.
  bool requires_grad = false;
  std::shared_ptr<runtime::Node> grad_fn;          ///< null for leaves
  std::weak_ptr<runtime::Node> grad_accumulator;   ///< leaves only, created lazily
  std::shared_ptr<TensorImpl> grad;                 ///< accumulated gradient of a leaf
  /// On a loss returned by GradScaler::scale: the factor it was multiplied by. backward() from
  /// such a root records the factor on every leaf it reaches (grad_scale below).
  double loss_scale = 1.0;
  /// On a leaf: the factor its .grad is still multiplied by (1 once unscaled). Lets
  /// clip_grad_norm refuse gradients that were never unscaled.
  double grad_scale = 1.0;
  /// On a leaf: called each time a backward pass has accumulated into its .grad
  /// (runtime::set_post_accumulate_grad_hook); null when none (the common case).
  std::shared_ptr<std::function<void()>> post_accumulate_grad_hook;
};
}  // namespace detail

/// A strided n-dimensional array of f32, bf16 or f16 values, or of fp8 values (storage only:
/// see docs/fp8.md). A default-constructed or moved-from
/// Tensor is undefined: every use except defined() throws StateError.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor& operator=(const Tensor&) = default;
  Tensor(Tensor&& other) noexcept : impl_(std::move(other.impl_)) {}
  Tensor& operator=(Tensor&& other) noexcept {
    impl_ = std::move(other.impl_);
    return *this;
  }

  // ---- factories (contiguous, new storage) ----
  /// Uninitialised tensor of the given shape and dtype on `device` (data loaders build batches
  /// on the host, Device{}, and upload them).
  static Tensor empty(const Shape& shape, DType dtype = DType::f32,
                      MemoryCategory category = MemoryCategory::activation,
                      Device device = current_device());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32,
                      MemoryCategory category = MemoryCategory::activation,
                      Device device = current_device());
  /// Uninitialised dense tensor laid out in `format` (channels_last: 4-D shapes only) on
  /// current_device().
  static Tensor empty(const Shape& shape, DType dtype, MemoryFormat format,
                      MemoryCategory category = MemoryCategory::activation);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  /// Every element set to value (rounded once to dtype).
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32);
  /// Copies values (rounded to dtype) into a new tensor on current_device() (one counted upload
  /// there); values.size() must equal numel(shape).
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            DType dtype = DType::f32);
  /// A 0-d tensor holding value.
  static Tensor scalar(float value, DType dtype = DType::f32);
  /// Normal(mean, stddev) samples from the counter-based RNG keyed by seed (reproducible).
  static Tensor randn(const Shape& shape, std::uint64_t seed, DType dtype = DType::f32,
                      float mean = 0.0f, float stddev = 1.0f);
  /// Uniform [low, high) samples from the counter-based RNG keyed by seed.
  static Tensor uniform(const Shape& shape, std::uint64_t seed, float low, float high,
                        DType dtype = DType::f32);

  // ---- metadata ----
  bool defined() const noexcept { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  std::int64_t offset() const { return impl().offset; }
  std::int64_t dim() const { return static_cast<std::int64_t>(impl().shape.size()); }
  /// Size of dimension d; negative d counts from the end.
  std::int64_t size(std::int64_t d) const;
  std::int64_t numel() const { return mixprec::numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * size_of(dtype()); }
  bool is_contiguous() const;
  /// True if dense in `format`'s order (contiguous: is_contiguous(); channels_last: 4-D with
  /// NHWC strides, the strides of size-1 dimensions aside).
  bool is_contiguous(MemoryFormat format) const;
  /// channels_last if the strides are exactly memory_format_strides(shape, channels_last) (what
  /// Tensor::empty(..., channels_last) and contiguous(channels_last) give) and the tensor is not
  /// also row-major; else contiguous. What layout-keeping ops (convolution, batch norm, pooling,
  /// element-wise ops) give their outputs.
  MemoryFormat memory_format() const;
  /// True if both handles refer to the same tensor object (not just equal values).
  bool is_same(const Tensor& other) const noexcept { return impl_ == other.impl_; }
  /// Memory category of the underlying storage; set_category re-files it.
  MemoryCategory category() const { return impl().storage->category(); }
  /// The device the storage lives on (see device.h).
  Device device() const { return impl().storage->device(); }
  void set_category(MemoryCategory category) const { impl().storage->set_category(category); }
  /// Version of the storage (increases on every in-place write).
  std::uint64_t version() const { return impl().storage->version(); }
  void bump_version() const { impl().storage->bump_version(); }

  // ---- data access ----
  /// Address of the first element (storage + offset) on device(): pass it to kernels; only on a
  /// host device may the host dereference it (to_vector/item/to(Device) move values across).
  void* data_ptr() const;
  /// Typed data_ptr(); throws DTypeError if T does not match dtype().
  template <class T> T* data() const {
    MIXPREC_CHECK(dtype_of<T> == dtype(), DTypeError, "Tensor::data",
                  "tensor is " << name(dtype()) << ", not " << name(dtype_of<T>));
    return static_cast<T*>(data_ptr());
  }
  /// All elements in row-major order, widened to float: one counted download (a host
  /// synchronisation on a device; name why with a TransferReason).
  std::vector<float> to_vector() const;
  /// The value of a one-element tensor (one counted download, as to_vector).
  float item() const;
  /// The raw bytes of a contiguous copy, in row-major order (one counted download).
  std::vector<std::uint8_t> to_bytes() const;
  /// A new contiguous tensor of `bytes` (row-major, dtype's encoding) on current_device() (one
  /// counted upload); bytes.size() must equal numel(shape) * size_of(dtype).
  static Tensor from_bytes(const void* bytes, std::size_t size, const Shape& shape, DType dtype);

  // ---- views and copies (differentiable; tensor_methods.cpp forwards them to the ops the ops
  //      floor registers, so tensor/ defines them without calling upward) ----
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(std::int64_t d0, std::int64_t d1) const;
  Tensor permute(const Shape& dims) const;
  /// Elements [start, end) with step along dim (a view).
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor contiguous() const;
  /// *this if memory_format() is already `format`; a view with `format`'s exact strides if the
  /// memory is already laid out that way; else a dense copy in `format` (differentiable).
  Tensor contiguous(MemoryFormat format) const;
  /// Cast to dtype (rounding to nearest even) in the same memory format; returns *this if
  /// already dtype. Casts to fp8 are
  /// straight-through for autograd: the gradient passes unchanged, in f32.
  Tensor to(DType dtype) const;
  /// A copy on `device` (one counted transfer; *this if already there). Not tracked by autograd.
  Tensor to(Device device) const;
  /// A new tensor with the same values (not tracked by autograd).
  Tensor clone() const;
  /// A handle sharing the data but cut from the autograd graph.
  Tensor detach() const;

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  /// Marks a leaf as requiring a gradient; throws StateError on a non-leaf, DTypeError on fp8.
  Tensor& set_requires_grad(bool on = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  /// Accumulated gradient of a leaf (undefined until a backward pass reaches it).
  Tensor grad() const;
  /// Replaces (or clears, with an undefined tensor) the accumulated gradient (DTypeError if fp8).
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<runtime::Node>& grad_fn() const { return impl().grad_fn; }
  /// Loss-scale factor still contained in grad() (1 unless a GradScaler-scaled backward has not
  /// been unscaled yet); set_grad_scale is for the GradScaler.
  double grad_scale() const { return impl().grad_scale; }
  void set_grad_scale(double scale) const { impl().grad_scale = scale; }
  /// Back-propagates from this tensor. A non-scalar needs an explicit gradient of its shape.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  /// Internal: the state behind the handle (throws StateError when undefined).
  detail::TensorImpl& impl() const;
  const std::shared_ptr<detail::TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

}  // namespace mixprec
