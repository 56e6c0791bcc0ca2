// The reference strided copy: an odometer over the shape, one scalar conversion per element
// (storage-only fp8 sides go through the bulk conversion of packed bytes).
#include "kernels/copy.h"

#include <cstring>
#include <vector>

#include "kernels/convert.h"

namespace mixprec::kernels {
namespace {

/// Calls fn(offset) with the element offset (strides in elements) of every index of shape, in
/// row-major order.
template <class Fn>
void for_each_offset(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                     std::int64_t n, const Fn& fn) {
  std::vector<std::int64_t> idx(shape.size(), 0);
  std::int64_t off = 0;
  for (std::int64_t count = 0; count < n; ++count) {
    fn(off);
    for (std::size_t d = shape.size(); d-- > 0;) {  // advance the odometer
      ++idx[d];
      off += strides[d];
      if (idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

/// Strided copy with a storage-only (fp8) side, which has no C++ arithmetic type to dispatch
/// on: gather the input's bytes row-major, convert in bulk, scatter to the output.
void copy_through_bytes(std::span<const std::int64_t> shape, const StridedInput& in,
                        const StridedOutput& out, std::int64_t n) {
  const std::size_t in_size = size_of(in.dtype), out_size = size_of(out.dtype);
  const auto count = static_cast<std::size_t>(n);
  std::vector<unsigned char> packed_in(count * in_size), packed_out(count * out_size);
  const auto* src = static_cast<const unsigned char*>(in.data);
  auto* dst = static_cast<unsigned char*>(out.data);
  std::size_t i = 0;
  for_each_offset(shape, in.strides, n, [&](std::int64_t off) {
    std::memcpy(&packed_in[i++ * in_size], src + off * static_cast<std::int64_t>(in_size), in_size);
  });
  ref::convert(packed_in.data(), in.dtype, packed_out.data(), out.dtype, count);
  i = 0;
  for_each_offset(shape, out.strides, n, [&](std::int64_t off) {
    std::memcpy(dst + off * static_cast<std::int64_t>(out_size), &packed_out[i++ * out_size],
                out_size);
  });
}

}  // namespace

namespace ref {
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  if (n == 0) return;
  if (is_storage_only(in.dtype) || is_storage_only(out.dtype)) {
    return copy_through_bytes(shape, in, out, n);
  }
  // General case: an odometer over the shape, converting element by element through float.
  const std::size_t nd = shape.size();
  std::vector<std::int64_t> idx(nd, 0);
  dispatch(in.dtype, out.dtype, [&](auto in_tag, auto out_tag) {
    using In = decltype(in_tag);
    using Out = decltype(out_tag);
    const In* src = static_cast<const In*>(in.data);
    Out* dst = static_cast<Out*>(out.data);
    std::int64_t in_off = 0, out_off = 0;
    for (std::int64_t count = 0; count < n; ++count) {
      dst[out_off] = Out(static_cast<float>(src[in_off]));
      for (std::size_t d = nd; d-- > 0;) {  // advance the odometer
        ++idx[d];
        in_off += in.strides[d];
        out_off += out.strides[d];
        if (idx[d] < shape[d]) break;
        in_off -= in.strides[d] * shape[d];
        out_off -= out.strides[d] * shape[d];
        idx[d] = 0;
      }
    }
  });
}
}  // namespace ref

}  // namespace mixprec::kernels
