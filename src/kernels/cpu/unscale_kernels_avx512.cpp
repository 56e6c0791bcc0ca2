// AVX-512F/DQ fused unscale + non-finite check of f32 gradients, 16 lanes. Compiled with
// AVX-512 flags: this file includes only intrinsics, C headers and the plain declarations of
// unscale_kernels.h (ODR safety), and is entered only after run-time dispatch
// (isa_allowed(Isa::avx512)).
//
// Bit-identical to unscale_f32_ref: one vmulps per element, correctly rounded like the scalar
// multiply. The verdict checks the product only: for a finite non-zero inv (the dispatcher's
// precondition) an Inf input gives +-Inf and a NaN input gives NaN, so "product non-finite" is
// exactly "input or product non-finite", the reference's rule. The optional amax is a masked
// vmaxps of |product| over the lanes the same classification found finite.
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

/// acc = max(acc, |y|) in the lanes where y is finite (bad = the lanes that are not). |y| is
/// never NaN there, so vmaxps's NaN rule never applies, and max is exact: the result equals the
/// reference's sequential max whatever the lane order.
inline __m512 max_finite_abs(__m512 acc, __mmask16 bad, __m512 y) {
  return _mm512_mask_max_ps(acc, static_cast<__mmask16>(~bad), acc, _mm512_abs_ps(y));
}

// kAmax is a template parameter so that the plain unscale keeps exactly its old loop.
template <bool kAmax>
bool unscale_loop(const float* in, float* out, std::size_t n, float inv, float* amax) noexcept {
  const __m512 s = _mm512_set1_ps(inv);
  // Two independent flag accumulators let two vectors per iteration be in flight; the mask OR
  // costs one cycle, far below the memory traffic this loop is bound by. The same holds for the
  // two amax accumulators (one vmaxps each per 16 elements).
  std::uint32_t bad0 = 0;
  std::uint32_t bad1 = 0;
  __m512 a0 = _mm512_setzero_ps();
  __m512 a1 = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 y0 = _mm512_mul_ps(_mm512_loadu_ps(in + i), s);
    const __m512 y1 = _mm512_mul_ps(_mm512_loadu_ps(in + i + 16), s);
    _mm512_storeu_ps(out + i, y0);
    _mm512_storeu_ps(out + i + 16, y1);
    const __mmask16 b0 = _mm512_fpclass_ps_mask(y0, kNonFinite);
    const __mmask16 b1 = _mm512_fpclass_ps_mask(y1, kNonFinite);
    bad0 |= b0;
    bad1 |= b1;
    if constexpr (kAmax) {
      a0 = max_finite_abs(a0, b0, y0);
      a1 = max_finite_abs(a1, b1, y1);
    }
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 y = _mm512_mul_ps(_mm512_loadu_ps(in + i), s);
    _mm512_storeu_ps(out + i, y);
    const __mmask16 b = _mm512_fpclass_ps_mask(y, kNonFinite);
    bad0 |= b;
    if constexpr (kAmax) a0 = max_finite_abs(a0, b, y);
  }
  if (i < n) {
    // Masked tail: lanes past the end are neither read, written nor classified (and they stay
    // out of amax: their loaded zeros are masked off too).
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, in + i), s);
    _mm512_mask_storeu_ps(out + i, m, y);
    const __mmask16 b = _mm512_mask_fpclass_ps_mask(m, y, kNonFinite);
    bad1 |= b;
    if constexpr (kAmax) a1 = max_finite_abs(a1, static_cast<__mmask16>(b | ~m), y);
  }
  if constexpr (kAmax) {
    const float a = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    if (a > *amax) *amax = a;
  }
  return (bad0 | bad1) != 0;
}

}  // namespace

bool unscale_f32_avx512(const float* in, float* out, std::size_t n, float inv,
                        float* amax) noexcept {
  return amax != nullptr ? unscale_loop<true>(in, out, n, inv, amax)
                         : unscale_loop<false>(in, out, n, inv, nullptr);
}

}  // namespace mixprec::kernels
