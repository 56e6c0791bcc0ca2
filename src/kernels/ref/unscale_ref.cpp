// Scalar reference of the fused unscale + non-finite check (+ optional amax): the specification
// the AVX-512 kernel must match bit for bit. The per-element step is kernels/spec/unscale_math.h
// (shared with the CUDA kernel).
#include <cstddef>
#include <cstdint>

#include "kernels/unscale.h"
#include "kernels/spec/unscale_math.h"
#include "mixprec/core/error.h"

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
    found |= unscale_math::non_finite(x, y);
    if constexpr (kAmax) a = unscale_math::raise_amax(a, y);
    out[i] = y;
  }
  if constexpr (kAmax) *amax = a;
  return found;
}

template <bool kAmax>
bool bits16_loop(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv, DType dtype,
                 float* amax) noexcept {
  const bool bf16 = dtype == DType::bf16;
  bool found = false;
  float a = kAmax ? *amax : 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    // The rounded result is checked: a product that overflows the 16-bit range is Inf there.
    const unscale_math::Unscaled16 u = unscale_math::unscale_16bit(in[i], inv, bf16);
    found |= unscale_math::non_finite(u.x, u.y);
    if constexpr (kAmax) a = unscale_math::raise_amax(a, u.y);
    out[i] = u.bits;
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
                       DType dtype, float* amax) noexcept {
  return amax != nullptr ? bits16_loop<true>(in, out, n, inv, dtype, amax)
                         : bits16_loop<false>(in, out, n, inv, dtype, nullptr);
}

namespace ref {
bool unscale_inplace(void* data, DType dtype, std::size_t n, float inv, float* amax) {
  if (dtype == DType::f32) {
    auto* p = static_cast<float*>(data);
    return unscale_f32_ref(p, p, n, inv, amax);
  }
  auto* p = static_cast<std::uint16_t*>(data);
  return unscale_16bit_ref(p, p, n, inv, dtype, amax);
}
void unscale(void* data, DType dtype, std::size_t n, float inv, float* found_inf, float* amax) {
  MIXPREC_ASSERT(found_inf != nullptr);  // the contract (unscale.h): one flag, never null
  if (unscale_inplace(data, dtype, n, inv, amax)) *found_inf = 1.0f;
}
void unscale_batch(const UnscaleBatch& batch) {
  for (int r = 0; r < batch.size; ++r) {
    const UnscaleRun& run = batch.runs[r];
    unscale(run.data, run.dtype, run.count, batch.inv, batch.found_inf, batch.amax);
  }
}
}  // namespace ref

}  // namespace mixprec::kernels
