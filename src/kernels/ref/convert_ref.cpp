// Scalar reference of the bulk conversions: element by element through the scalar functions of
// half.h, float8.h and convert.h, with the random bits of random.h. This is the specification
// the cpu backend matches bit for bit; single-threaded, and it never calls the public
// mixprec::convert* (which forward to a backend, possibly this one).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/convert.h"
#include "kernels/spec/storage_dispatch.h"
#include "mixprec/core/stochastic_rounding.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/half.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::ref {
namespace {

/// dst[i] = src[i] widened to f32 (exact for every type), then rounded to D (nearest even).
template <typename S, typename D>
void convert_loop(const S* src, D* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = D(static_cast<float>(src[i]));
}

}  // namespace

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  if (n == 0) return;
  if (src_dtype == dst_dtype) {
    std::memmove(dst, src, n * size_of(src_dtype));
    return;
  }
  // Widening is exact and every value of a narrower format fits the wider ones, so each pair
  // (16-bit to 16-bit and fp8 pairs included) rounds exactly once.
  dispatch_storage(src_dtype, [&](auto s) {
    dispatch_storage(dst_dtype, [&](auto d) {
      convert_loop(static_cast<const decltype(s)*>(src), static_cast<decltype(d)*>(dst), n);
    });
  });
}

void convert_stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n,
                        std::uint64_t seed, std::uint64_t offset) {
  auto* out = static_cast<std::uint16_t*>(dst);
  const bool bf16 = dst_dtype == DType::bf16;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t random = random_bits(seed, offset + i);
    out[i] = bf16 ? f32_to_bf16_bits_stochastic(src[i], random)
                  : f32_to_f16_bits_stochastic(src[i], random);
  }
}

}  // namespace mixprec::kernels::ref
