// Scalar reference of the fused unscale + non-finite check (+ optional amax): the specification
// the AVX-512 kernel must match bit for bit.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/unscale.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {
namespace {

// kAmax is a template parameter so that the plain unscale (dynamic loss scaling) keeps its
// branch-free loop with no amax bookkeeping at all.
template <bool kAmax>
bool f32_loop(const float* in, float* out, std::size_t n, float inv, float* amax) noexcept {
  bool found = false;
  float a = kAmax ? *amax : 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float y = x * inv;
    // Non-short-circuit '|' keeps the loop branch-free; both sides are checked on purpose (the
    // specification), even though y is non-finite whenever x is for a finite non-zero inv.
    found |= !std::isfinite(x) | !std::isfinite(y);
    // Only finite outputs enter amax: Inf/NaN are reported by the verdict instead.
    if constexpr (kAmax) a = std::isfinite(y) ? std::max(a, std::fabs(y)) : a;
    out[i] = y;
  }
  if constexpr (kAmax) *amax = a;
  return found;
}

template <bool kAmax>
bool bits16_loop(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv, int dtype,
                 float* amax) noexcept {
  const bool bf16 = dtype == kUnscaleBF16;
  bool found = false;
  float a = kAmax ? *amax : 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = bf16 ? bf16_bits_to_f32(in[i]) : f16_bits_to_f32(in[i]);
    const std::uint16_t bits = bf16 ? f32_to_bf16_bits(x * inv) : f32_to_f16_bits(x * inv);
    // Check the rounded result: a product that overflows the 16-bit range becomes Inf there.
    const float y = bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
    found |= !std::isfinite(x) | !std::isfinite(y);
    if constexpr (kAmax) a = std::isfinite(y) ? std::max(a, std::fabs(y)) : a;
    out[i] = bits;
  }
  if constexpr (kAmax) *amax = a;
  return found;
}

}  // namespace

bool unscale_f32_ref(const float* in, float* out, std::size_t n, float inv, float* amax) noexcept {
  return amax != nullptr ? f32_loop<true>(in, out, n, inv, amax)
                         : f32_loop<false>(in, out, n, inv, nullptr);
}

bool unscale_16bit_ref(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv,
                       int dtype, float* amax) noexcept {
  return amax != nullptr ? bits16_loop<true>(in, out, n, inv, dtype, amax)
                         : bits16_loop<false>(in, out, n, inv, dtype, nullptr);
}

namespace ref {
bool unscale_inplace(void* data, int dtype, std::size_t n, float inv, float* amax) {
  if (dtype == kUnscaleF32) {
    auto* p = static_cast<float*>(data);
    return unscale_f32_ref(p, p, n, inv, amax);
  }
  auto* p = static_cast<std::uint16_t*>(data);
  return unscale_16bit_ref(p, p, n, inv, dtype, amax);
}
void unscale(void* data, int dtype, std::size_t n, float inv, float* found_inf, float* amax) {
  MIXPREC_ASSERT(found_inf != nullptr);  // the contract (unscale.h): one flag, never null
  if (unscale_inplace(data, dtype, n, inv, amax)) *found_inf = 1.0f;
}
}  // namespace ref

}  // namespace mixprec::kernels
