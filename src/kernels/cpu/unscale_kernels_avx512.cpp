// AVX-512F/DQ fused unscale + non-finite check of f32 gradients, 16 lanes. Compiled with
// AVX-512 flags: this file includes only intrinsics, C headers and the plain declarations of
// unscale_kernels.h (ODR safety), and is entered only after run-time dispatch
// (max_isa() >= Isa::avx512).
//
// Bit-identical to unscale_f32_ref: one vmulps per element, correctly rounded like the scalar
// multiply. The verdict checks the product only: for a finite non-zero inv (the dispatcher's
// precondition) an Inf input gives +-Inf and a NaN input gives NaN, so "product non-finite" is
// exactly "input or product non-finite", the reference's rule.
// GCC 12.1/12.2 warn inside AVX-512 intrinsics about their deliberately undefined temporaries
// (GCC bug 105593): a false positive.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/unscale_kernels.h"

namespace mixprec::kernels {
namespace {

// vfpclassps categories: QNaN (0x01), +Inf (0x08), -Inf (0x10), SNaN (0x80).
constexpr int kNonFinite = 0x01 | 0x08 | 0x10 | 0x80;

}  // namespace

bool unscale_f32_avx512(const float* in, float* out, std::size_t n, float inv) noexcept {
  const __m512 s = _mm512_set1_ps(inv);
  // Two independent flag accumulators let two vectors per iteration be in flight; the mask OR
  // costs one cycle, far below the memory traffic this loop is bound by.
  std::uint32_t bad0 = 0;
  std::uint32_t bad1 = 0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 y0 = _mm512_mul_ps(_mm512_loadu_ps(in + i), s);
    const __m512 y1 = _mm512_mul_ps(_mm512_loadu_ps(in + i + 16), s);
    _mm512_storeu_ps(out + i, y0);
    _mm512_storeu_ps(out + i + 16, y1);
    bad0 |= _mm512_fpclass_ps_mask(y0, kNonFinite);
    bad1 |= _mm512_fpclass_ps_mask(y1, kNonFinite);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 y = _mm512_mul_ps(_mm512_loadu_ps(in + i), s);
    _mm512_storeu_ps(out + i, y);
    bad0 |= _mm512_fpclass_ps_mask(y, kNonFinite);
  }
  if (i < n) {
    // Masked tail: lanes past the end are neither read, written nor classified.
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, in + i), s);
    _mm512_mask_storeu_ps(out + i, m, y);
    bad1 |= _mm512_mask_fpclass_ps_mask(m, y, kNonFinite);
  }
  return (bad0 | bad1) != 0;
}

}  // namespace mixprec::kernels
