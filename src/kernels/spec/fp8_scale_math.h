#pragma once
/// The per-element and per-scale math of the fp8 training recipes (fp8_scale.h), written once:
/// the reference loops (ref/fp8_scale_ref.cpp), the cpu kernels and the CUDA kernels
/// (MIXPREC_HD) call these, so a cast, an amax and a scale are the same bits on every backend.
/// Kept out of fp8_scale.h, which the backend table includes everywhere.
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/spec/host_device.h"
#include "mixprec/core/float8.h"

namespace mixprec::kernels::fp8_math {

/// The largest finite value of E4M3 (448) or E5M2 (57344); the only two fp8 formats.
MIXPREC_HD constexpr float fp8_max(bool e4m3) { return e4m3 ? 448.0f : 57344.0f; }

/// OCP's saturating conversion of v to fp8, round to nearest even: a finite value that would
/// round beyond the largest finite one becomes +-max, NaN stays NaN (with its sign), and +-Inf
/// becomes +-max too, as PTX's cvt .satfinite does (the instruction a GPU cast uses). Clamping
/// to +-max before the one rounding is the same as rounding then clipping, because max is
/// representable and every value beyond it rounds to max or overflows.
MIXPREC_HD inline std::uint8_t saturating_fp8_bits(float v, bool e4m3) {
  const float m = fp8_max(e4m3);
  // NaN compares false both ways and passes through to the non-saturating rule (NaN -> NaN).
  const float c = v > m ? m : (v < -m ? -m : v);
  return e4m3 ? f32_to_e4m3_bits(c) : f32_to_e5m2_bits(c);
}

/// |x| as its f32 bit pattern. Non-negative floats order as their patterns, and every NaN
/// pattern lies above Inf's, so the max of these over a tensor is max |x| when all are finite,
/// Inf when one is Inf and none NaN, and a NaN when one is NaN: NaN propagates (the skip rule
/// must see it), and the max of integers is the same whatever order threads combine it in.
MIXPREC_HD inline std::uint32_t abs_bits(float x) { return std::bit_cast<std::uint32_t>(x) & 0x7fffffffu; }

/// The value an operand of the fp8 GEMM (fp8_gemm.h) stands for: its decoded value times the
/// f32 reciprocal of the scale it was cast with. For a power-of-two scale the reciprocal and the
/// product are exact, so the operand is exactly the value it was quantised from (up to the
/// cast's one rounding), and two such operands multiply exactly in f32.
MIXPREC_HD inline float operand_value(std::uint8_t bits, bool e4m3, float inv_scale) {
  return (e4m3 ? e4m3_bits_to_f32(bits) : e5m2_bits_to_f32(bits)) * inv_scale;
}

/// The scaled, saturated element: sat_fp8(x * scale), the product rounded to f32 first (exact
/// for a power-of-two scale that keeps x * scale normal, which the recipes' scales do).
MIXPREC_HD inline std::uint8_t scaled_cast(float x, float scale, bool e4m3) {
  return saturating_fp8_bits(x * scale, e4m3);
}

/// The recipe's scale from a finite, positive amax: 2^(k - margin), k = floor(log2(max / amax))
/// computed exactly (the largest k with amax * 2^k <= max, from the two numbers' binary
/// exponents: no division, no log, no rounding), the exponent clamped to f32's normal range
/// [-126, 127] so the scale and its inverse are exact powers of two.
MIXPREC_HD inline float pow2_scale(float amax, float max, int margin) {
  int ea = 0, em = 0;
  const float ma = std::frexp(amax, &ea);  // amax = ma * 2^ea, ma in [0.5, 1)
  const float mm = std::frexp(max, &em);
  // amax * 2^k <= max  <=>  ma * 2^(ea + k) <= mm * 2^em: k = em - ea when ma <= mm, one less
  // otherwise (both mantissas lie in one binade, so they decide the last step alone).
  int k = em - ea - (ma <= mm ? 0 : 1) - margin;
  k = k < -126 ? -126 : (k > 127 ? 127 : k);
  return std::ldexp(1.0f, k);
}

/// True for a finite amax (a NaN or Inf one is reported, never pushed into a history).
MIXPREC_HD inline bool amax_is_finite(float a) { return (abs_bits(a) >> 23) != 0xffu; }

/// What one scale update decides from the window's largest amax (the new one included):
/// a new scale when it is positive (and finite, as every entry of a history is), else the old
/// one: an all-zero window says nothing about the range.
MIXPREC_HD inline float updated_scale(float window_amax, float old_scale, float max, int margin) {
  const bool usable = window_amax > 0.0f && amax_is_finite(window_amax);
  return usable ? pow2_scale(window_amax, max, margin) : old_scale;
}

}  // namespace mixprec::kernels::fp8_math
