// AVX-512F/BW/VL + F16C fused optimizer updates, 16 lanes. Compiled with AVX-512 flags: this file
// includes only intrinsics, C headers and the plain declarations of optim_kernels.h (ODR safety),
// and is entered only after run-time dispatch (isa_allowed(Isa::avx512)).
//
// Bit-identical to optim_ref.cpp: the same sequence of fma / mul / div / sqrt, each correctly
// rounded by the hardware. Every product that feeds an addition is an explicit fmadd, so the
// compiler's contraction (-ffp-contract=fast, GCC's default for C++) has nothing left to fuse.
// GCC 12.1/12.2 warn inside AVX-512 intrinsics about their deliberately undefined `__Y = __Y`
// temporaries (GCC bug 105593, fixed in 12.3; seen here at -O1 and with sanitizers): a false
// positive.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/optim_kernels.h"

namespace mixprec::kernels {
namespace {

constexpr int kF16Rounding = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

/// Mask of the first min(left, 16) lanes.
__mmask16 lanes(std::size_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}

/// 16 bf16 bit patterns widened to f32 (a pure shift, like bf16_bits_to_f32).
__m512 load_bf16(const void* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// 16 f16 bit patterns widened to f32 with vcvtph2ps (exact; matches f16_bits_to_f32).
__m512 load_f16(const void* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

template <int DT>
__m512 load_as_f32(const void* base, std::size_t i, __mmask16 m) {
  if constexpr (DT == kOptimF32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(base) + i);
  } else if constexpr (DT == kOptimBF16) {
    return load_bf16(static_cast<const std::uint16_t*>(base) + i, m);
  } else {
    return load_f16(static_cast<const std::uint16_t*>(base) + i, m);
  }
}

/// NaN lanes of f32 bit patterns (magnitude above the Inf pattern).
__mmask16 nan_lanes(__m512i x) {
  const __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  return _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
}

/// f32 -> bf16 bits (low half of each lane) rounding to nearest even, as f32_to_bf16_bits:
/// add 0x7fff plus the kept lsb and truncate; NaN keeps its top bits and gets the quiet bit.
__m512i bf16_rne(__m512 value) {
  const __m512i x = _mm512_castps_si512(value);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __m512i quiet = _mm512_or_si512(x, _mm512_set1_epi32(0x00400000));
  return _mm512_srli_epi32(_mm512_mask_blend_epi32(nan_lanes(x), rounded, quiet), 16);
}

/// f32 -> bf16 bits with stochastic rounding, as f32_to_bf16_bits_stochastic: add the top 16
/// random bits below the kept bits and truncate (a carry into the exponent gives Inf correctly).
__m512i bf16_stochastic(__m512 value, __m512i random) {
  const __m512i x = _mm512_castps_si512(value);
  const __m512i sum = _mm512_add_epi32(x, _mm512_srli_epi32(random, 16));
  const __m512i quiet = _mm512_or_si512(x, _mm512_set1_epi32(0x00400000));
  return _mm512_srli_epi32(_mm512_mask_blend_epi32(nan_lanes(x), sum, quiet), 16);
}

/// The parameter element type, and how its new value is written (see OptimWrite).
template <int ParamT, int Write>
struct ParamIo {
  /// The f32 value the update starts from.
  static __m512 load(const OptimArrays& a, std::size_t i, __mmask16 m) {
    if constexpr (Write == kWriteMaster) return _mm512_maskz_loadu_ps(m, a.master + i);
    return load_as_f32<ParamT>(a.param, i, m);
  }
  static void store(const OptimArrays& a, std::size_t i, __mmask16 m, __m512 value) {
    if constexpr (ParamT == kOptimF32) {
      _mm512_mask_storeu_ps(static_cast<float*>(a.param) + i, m, value);
      return;
    } else {
      std::uint16_t* out = static_cast<std::uint16_t*>(a.param) + i;
      if constexpr (Write == kWriteMaster) _mm512_mask_storeu_ps(a.master + i, m, value);
      if constexpr (Write == kWriteStochastic) {
        static_assert(ParamT == kOptimBF16, "f16 stochastic rounding runs in the reference");
        const __m512i random = _mm512_maskz_loadu_epi32(m, a.random + i);
        _mm512_mask_cvtepi32_storeu_epi16(out, m, bf16_stochastic(value, random));
      } else if constexpr (ParamT == kOptimBF16) {
        _mm512_mask_cvtepi32_storeu_epi16(out, m, bf16_rne(value));
      } else {
        _mm256_mask_storeu_epi16(out, m, _mm512_cvtps_ph(value, kF16Rounding));
      }
    }
  }
};

template <int GradT, int ParamT, int Write>
void sgd_loop(const OptimArrays& a, const SgdScalars& s, std::size_t count) {
  using Io = ParamIo<ParamT, Write>;
  const __m512 neg_lr = _mm512_set1_ps(-s.lr);
  const __m512 wd = _mm512_set1_ps(s.weight_decay);
  const __m512 momentum = _mm512_set1_ps(s.momentum);
  const __m512 omd = _mm512_set1_ps(s.one_minus_dampening);
  const bool decay = s.weight_decay != 0.0f;
  const bool has_buffer = s.momentum != 0.0f;
  for (std::size_t i = 0; i < count; i += 16) {
    const __mmask16 m = lanes(count - i);
    __m512 g = load_as_f32<GradT>(a.grad, i, m);
    const __m512 p = Io::load(a, i, m);
    if (decay) g = _mm512_fmadd_ps(wd, p, g);
    __m512 d = g;
    if (has_buffer) {
      const __m512 buf =
          s.first_step
              ? g
              : _mm512_fmadd_ps(momentum, _mm512_maskz_loadu_ps(m, a.state0 + i), _mm512_mul_ps(omd, g));
      _mm512_mask_storeu_ps(a.state0 + i, m, buf);
      d = s.nesterov ? _mm512_fmadd_ps(momentum, buf, g) : buf;
    }
    Io::store(a, i, m, _mm512_fmadd_ps(neg_lr, d, p));
  }
}

template <int GradT, int ParamT, int Write>
void adam_loop(const OptimArrays& a, const AdamScalars& s, std::size_t count) {
  using Io = ParamIo<ParamT, Write>;
  const __m512 beta1 = _mm512_set1_ps(s.beta1);
  const __m512 omb1 = _mm512_set1_ps(s.one_minus_beta1);
  const __m512 beta2 = _mm512_set1_ps(s.beta2);
  const __m512 omb2 = _mm512_set1_ps(s.one_minus_beta2);
  const __m512 eps = _mm512_set1_ps(s.eps);
  const __m512 l2 = _mm512_set1_ps(s.l2_weight_decay);
  const __m512 decay = _mm512_set1_ps(s.decay);
  const __m512 neg_step = _mm512_set1_ps(-s.step_size);
  const __m512 inv_bc2 = _mm512_set1_ps(s.inv_sqrt_bias_correction2);
  const bool has_l2 = s.l2_weight_decay != 0.0f;
  for (std::size_t i = 0; i < count; i += 16) {
    const __mmask16 m = lanes(count - i);
    __m512 g = load_as_f32<GradT>(a.grad, i, m);
    const __m512 p = _mm512_mul_ps(Io::load(a, i, m), decay);
    if (has_l2) g = _mm512_fmadd_ps(l2, p, g);
    const __m512 mo = _mm512_maskz_loadu_ps(m, a.state0 + i);
    const __m512 vo = _mm512_maskz_loadu_ps(m, a.state1 + i);
    const __m512 mn = _mm512_fmadd_ps(beta1, mo, _mm512_mul_ps(omb1, g));
    const __m512 vn = _mm512_fmadd_ps(_mm512_mul_ps(omb2, g), g, _mm512_mul_ps(beta2, vo));
    _mm512_mask_storeu_ps(a.state0 + i, m, mn);
    _mm512_mask_storeu_ps(a.state1 + i, m, vn);
    const __m512 denom = _mm512_fmadd_ps(_mm512_sqrt_ps(vn), inv_bc2, eps);
    // Masked-off lanes divide 0 by eps: harmless, they are never stored.
    Io::store(a, i, m, _mm512_fmadd_ps(neg_step, _mm512_div_ps(mn, denom), p));
  }
}

/// Calls Loop<GradT, ParamT, Write> for the run-time dtypes and write mode of `a`.
template <template <int, int, int> class Loop, class Scalars>
void dispatch(const OptimArrays& a, const Scalars& s, std::size_t count) {
  auto by_param = [&]<int GradT>() {
    if (a.param_dtype == kOptimF32) {
      Loop<GradT, kOptimF32, kWriteInPlace>::run(a, s, count);
    } else if (a.write == kWriteStochastic) {
      Loop<GradT, kOptimBF16, kWriteStochastic>::run(a, s, count);
    } else if (a.param_dtype == kOptimBF16) {
      Loop<GradT, kOptimBF16, kWriteMaster>::run(a, s, count);
    } else {
      Loop<GradT, kOptimF16, kWriteMaster>::run(a, s, count);
    }
  };
  if (a.grad_dtype == kOptimF32) {
    by_param.template operator()<kOptimF32>();
  } else if (a.grad_dtype == kOptimBF16) {
    by_param.template operator()<kOptimBF16>();
  } else {
    by_param.template operator()<kOptimF16>();
  }
}

template <int GradT, int ParamT, int Write>
struct SgdLoop {
  static void run(const OptimArrays& a, const SgdScalars& s, std::size_t n) {
    sgd_loop<GradT, ParamT, Write>(a, s, n);
  }
};

template <int GradT, int ParamT, int Write>
struct AdamLoop {
  static void run(const OptimArrays& a, const AdamScalars& s, std::size_t n) {
    adam_loop<GradT, ParamT, Write>(a, s, n);
  }
};

}  // namespace

void sgd_update_avx512(const OptimArrays& a, const SgdScalars& s, std::size_t count) noexcept {
  dispatch<SgdLoop>(a, s, count);
}

void adam_update_avx512(const OptimArrays& a, const AdamScalars& s, std::size_t count) noexcept {
  dispatch<AdamLoop>(a, s, count);
}

}  // namespace mixprec::kernels
