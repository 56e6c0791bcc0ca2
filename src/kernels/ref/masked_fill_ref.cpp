// Reference masked_fill: an odometer over the shape, one comparison and one selection per
// element.
#include <cstring>
#include <vector>

#include "kernels/masked_fill.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

std::int64_t detail::masked_fill_count(std::span<const std::int64_t> shape,
                                       const StridedInput& mask) {
  const std::size_t rank = shape.size();
  MIXPREC_CHECK(mask.strides.size() == rank, ShapeError, "masked_fill",
                "mask has " << mask.strides.size() << " strides for a rank-" << rank << " shape");
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    MIXPREC_CHECK(d >= 0, ShapeError, "masked_fill", "negative dimension " << d << " in shape");
    n *= d;
  }
  return n;
}

namespace ref {

void masked_fill(std::span<const std::int64_t> shape, const void* x, DType dtype,
                 const StridedInput& mask, float value, void* out) {
  const std::size_t rank = shape.size();
  const std::int64_t n = detail::masked_fill_count(shape, mask);
  dispatch(dtype, mask.dtype, [&](auto tx, auto tm) {
    using T = decltype(tx);
    using TM = decltype(tm);
    const T fill(value);
    const T* src = static_cast<const T*>(x);
    const TM* m = static_cast<const TM*>(mask.data);
    T* dst = static_cast<T*>(out);
    std::vector<std::int64_t> idx(rank, 0);
    std::int64_t off = 0;  // the mask's offset at idx
    for (std::int64_t i = 0; i < n; ++i) {
      // A copy of the element (bits, a NaN's payload too), not a round trip through f32.
      dst[i] = static_cast<float>(m[off]) != 0.0f ? fill : src[i];
      for (std::size_t d = rank; d-- > 0;) {
        off += mask.strides[d];
        if (++idx[d] < shape[d]) break;
        off -= mask.strides[d] * shape[d];
        idx[d] = 0;
      }
    }
  });
}

void where(std::int64_t n, const void* cond, DType cond_dtype, const void* a, const void* b,
           DType dtype, void* out) {
  MIXPREC_CHECK(n >= 0, ShapeError, "where", "negative element count " << n);
  const std::size_t es = size_of(dtype);
  dispatch(cond_dtype, [&](auto tc) {
    using TC = decltype(tc);
    const TC* c = static_cast<const TC*>(cond);
    for (std::int64_t i = 0; i < n; ++i) {
      // The element's bytes, whatever the dtype: a copy, not a conversion.
      const void* src = static_cast<float>(c[i]) != 0.0f ? a : b;
      std::memcpy(static_cast<char*>(out) + i * static_cast<std::int64_t>(es),
                  static_cast<const char*>(src) + i * static_cast<std::int64_t>(es), es);
    }
  });
}

}  // namespace ref
}  // namespace mixprec::kernels
