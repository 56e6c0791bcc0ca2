// TEMPORARY (replaced by the Highway conversion kernels): the conversion entries of both
// backends forward to the current implementation in core/convert.cpp.
#include "kernels/convert.h"

#include "mixprec/core/convert.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {
void stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n, std::uint64_t seed,
                std::uint64_t offset) {
  if (dst_dtype == DType::bf16) {
    convert_f32_to_bf16_stochastic(src, static_cast<bfloat16*>(dst), n, seed, offset);
  } else {
    convert_f32_to_f16_stochastic(src, static_cast<float16*>(dst), n, seed, offset);
  }
}
}  // namespace
namespace cpu {
void convert(const void* src, DType s, void* dst, DType d, std::size_t n) {
  mixprec::convert(src, s, dst, d, n);
}
void convert_stochastic(const float* src, void* dst, DType d, std::size_t n, std::uint64_t seed,
                        std::uint64_t offset) {
  stochastic(src, dst, d, n, seed, offset);
}
}  // namespace cpu
namespace ref {
void convert(const void* src, DType s, void* dst, DType d, std::size_t n) {
  mixprec::convert(src, s, dst, d, n);
}
void convert_stochastic(const float* src, void* dst, DType d, std::size_t n, std::uint64_t seed,
                        std::uint64_t offset) {
  stochastic(src, dst, d, n, seed, offset);
}
}  // namespace ref
}  // namespace mixprec::kernels
