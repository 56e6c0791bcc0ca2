// The CPU strided copy: contiguous-to-contiguous copies run the bulk (Highway) conversions on
// all threads; other layouts take the reference odometer.
#include "kernels/copy.h"

#include "kernels/convert.h"

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

namespace cpu {
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  if (n == 0) return;
  if (is_row_major(shape, in.strides) && is_row_major(shape, out.strides)) {
    cpu::convert(in.data, in.dtype, out.data, out.dtype, static_cast<std::size_t>(n));
    return;
  }
  ref::copy(shape, in, out);
}
}  // namespace cpu

}  // namespace mixprec::kernels
