#include "kernels/copy.h"

#include <cstring>
#include <vector>

#include "mixprec/core/convert.h"

namespace mixprec::kernels {
namespace {

bool is_row_major(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

}  // namespace

void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  if (n == 0) return;
  if (is_row_major(shape, in.strides) && is_row_major(shape, out.strides)) {
    convert(in.data, in.dtype, out.data, out.dtype, static_cast<std::size_t>(n));
    return;
  }
  // General case: an odometer over the shape, converting element by element through float.
  const std::size_t nd = shape.size();
  std::vector<std::int64_t> idx(nd, 0);
  dispatch(in.dtype, [&](auto in_tag) {
    using In = decltype(in_tag);
    dispatch(out.dtype, [&](auto out_tag) {
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
  });
}

}  // namespace mixprec::kernels
