// The public bulk conversions of host arrays (mixprec/kernels/convert_arrays.h): argument checks,
// then the host kernels of the active backend (kernels::host_backend(): convert,
// convert_stochastic), whose cpu and ref implementations are bit-identical to the scalar
// functions of core/half.h, core/float8.h and core/stochastic_rounding.h.
#include "mixprec/kernels/convert_arrays.h"

#include <cstdint>
#include <string>

#include "kernels/convert_checks.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"

namespace mixprec {

using detail::check_convert_buffers;
using detail::check_counter_offset;

// ---- bulk conversions ----

namespace {

// Host arrays run on the active backend when it computes on the host (cpu, ref: the logged
// dispatch of kernels::convert), else on the host's kernels (kernels::host_backend()).
void host_convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  if (&kernels::host_backend() == &kernels::backend()) {
    kernels::convert(src, src_dtype, dst, dst_dtype, n);
  } else {
    kernels::host_backend().convert(src, src_dtype, dst, dst_dtype, n);
  }
}
void host_convert_stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n,
                             std::uint64_t seed, std::uint64_t offset) {
  if (&kernels::host_backend() == &kernels::backend()) {
    kernels::convert_stochastic(src, dst, dst_dtype, n, seed, offset);
  } else {
    kernels::host_backend().convert_stochastic(src, dst, dst_dtype, n, seed, offset);
  }
}

}  // namespace

void convert_f32_to_bf16(const float* src, bfloat16* dst, std::size_t n) {
  check_convert_buffers("convert_f32_to_bf16", src, 4, dst, 2, n);
  host_convert(src, DType::f32, dst, DType::bf16, n);
}

void convert_bf16_to_f32(const bfloat16* src, float* dst, std::size_t n) {
  check_convert_buffers("convert_bf16_to_f32", src, 2, dst, 4, n);
  host_convert(src, DType::bf16, dst, DType::f32, n);
}

void convert_f32_to_f16(const float* src, float16* dst, std::size_t n) {
  check_convert_buffers("convert_f32_to_f16", src, 4, dst, 2, n);
  host_convert(src, DType::f32, dst, DType::f16, n);
}

void convert_f16_to_f32(const float16* src, float* dst, std::size_t n) {
  check_convert_buffers("convert_f16_to_f32", src, 2, dst, 4, n);
  host_convert(src, DType::f16, dst, DType::f32, n);
}

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  constexpr const char* op = "convert";
  const auto valid = [](DType t) { return static_cast<std::size_t>(t) < kDTypeTable.size(); };
  MIXPREC_CHECK(valid(src_dtype) && valid(dst_dtype), DTypeError, op,
                "unknown dtype code " << static_cast<int>(valid(src_dtype) ? dst_dtype : src_dtype)
                                      << "; use DType::f32, bf16, f16, f8e4m3 or f8e5m2");
  if (src_dtype == dst_dtype) {
    // Same dtype: a copy, for which overlapping ranges are fine (the backends memmove).
    MIXPREC_CHECK(n == 0 || (src != nullptr && dst != nullptr), ValueError, op,
                  "null " << (src == nullptr ? "src" : "dst") << " with n = " << n
                          << "; pass buffers of n elements");
  } else {
    check_convert_buffers(op, src, size_of(src_dtype), dst, size_of(dst_dtype), n);
  }
  host_convert(src, src_dtype, dst, dst_dtype, n);
}

void convert_f32_to_bf16_stochastic(const float* src, bfloat16* dst, std::size_t n,
                                    std::uint64_t seed, std::uint64_t offset) {
  constexpr const char* op = "convert_f32_to_bf16_stochastic";
  check_convert_buffers(op, src, 4, dst, 2, n);
  check_counter_offset(op, offset, n);
  host_convert_stochastic(src, dst, DType::bf16, n, seed, offset);
}

void convert_f32_to_f16_stochastic(const float* src, float16* dst, std::size_t n,
                                   std::uint64_t seed, std::uint64_t offset) {
  constexpr const char* op = "convert_f32_to_f16_stochastic";
  check_convert_buffers(op, src, 4, dst, 2, n);
  check_counter_offset(op, offset, n);
  host_convert_stochastic(src, dst, DType::f16, n, seed, offset);
}

}  // namespace mixprec
