// Fused optimizer updates (SGD with momentum/Nesterov/weight decay, Adam, AdamW) over Highway:
// one source compiled for every target, chosen at run time. One pass per element reads the
// parameter (or its fp32 master), the gradient and the fp32 state and writes them back.
//
// Bit-identical to the scalar reference (ref/optim_ref.cpp) on every target: the same sequence
// of fma / mul / div / sqrt, each one correctly rounded IEEE operation, nothing reassociated or
// approximated; 16-bit reads and writes use the exact conversions of convert-inl.h. The one trap is the
// fused multiply-add: hn::MulAdd is fused only on targets with an FMA instruction (AVX2, AVX-512,
// NEON on arm64, SVE); SSE4 and the scalar/EMU128 targets compute a*b+c with two roundings. Fma()
// below therefore runs std::fma lane by lane there (HWY_NATIVE_FMA == 0). Cost: one libm fmaf call
// per lane and fma (3-5 per element here), which makes those targets several times slower than
// AVX2 (they only run on CPUs without AVX2, or when capped by MIXPREC_ISA); exactness wins.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/optim_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/optim_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace {

/// a * b + c with one rounding, like std::fma (see the file comment for the non-FMA targets).
HWY_INLINE VF Fma(VF a, VF b, VF c) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(a, b, c);
#else
  const DF df;
  HWY_ALIGN float la[kMaxF32Lanes];
  HWY_ALIGN float lb[kMaxF32Lanes];
  HWY_ALIGN float lc[kMaxF32Lanes];
  hn::Store(a, df, la);
  hn::Store(b, df, lb);
  hn::Store(c, df, lc);
  for (std::size_t k = 0; k < hn::Lanes(df); ++k) la[k] = std::fma(la[k], lb[k], lc[k]);
  return hn::Load(df, la);
#endif
}

/// Gradient elements i.. as the update uses them: widened to f32 and, for a multiplier m other
/// than 1 (loop-invariant), multiplied by m and rounded to the gradient's dtype through a stack
/// copy (the exact conversions of convert-inl.h), the reference's grad_value.
template <int GradT>
HWY_INLINE VF LoadGrad(const OptimArrays& a, std::size_t i, float m) {
  const DF df;
  const VF g = LoadF32<GradT>(df, a.grad, i);
  if (m == 1.0f) return g;
  const VF scaled = hn::Mul(g, hn::Set(df, m));
  if constexpr (GradT == kF32) {
    return scaled;
  } else {
    HWY_ALIGN std::uint16_t rounded[kMaxF32Lanes];
    StoreF32<GradT>(df, scaled, rounded, 0);
    return LoadF32<GradT>(df, rounded, 0);
  }
}

/// The f32 value the update starts from: the master if there is one, else the parameter.
template <int ParamT, int Write>
HWY_INLINE VF LoadParam(const OptimArrays& a, std::size_t i) {
  if constexpr (Write == kWriteMaster) return hn::LoadU(DF(), a.master + i);
  return LoadF32<ParamT>(DF(), a.param, i);
}

/// Stores the new value: in place (f32), to the master plus its round-to-nearest-even 16-bit
/// copy, or with stochastic rounding from each element's random bits.
template <int ParamT, int Write>
HWY_INLINE void StoreParam(const OptimArrays& a, std::size_t i, VF value) {
  const DF df;
  if constexpr (ParamT == kF32) {
    hn::StoreU(value, df, static_cast<float*>(a.param) + i);
    // Loop-invariant branch on the copy: predicted, and cheaper than four more instantiations.
    if (a.copy != nullptr) {
      if (a.copy_dtype == DType::bf16) {
        StoreF32<kBF16>(df, value, a.copy, i);
      } else {
        StoreF32<kF16>(df, value, a.copy, i);
      }
    }
  } else {
    const D16<DF> d16;
    std::uint16_t* out = static_cast<std::uint16_t*>(a.param) + i;
    if constexpr (Write == kWriteStochastic) {
      const auto random = hn::LoadU(DU(), a.random + i);
      if constexpr (ParamT == kBF16) {
        hn::StoreU(NarrowBF16Stochastic(df, value, random), d16, out);
      } else {
        hn::StoreU(NarrowF16Stochastic(df, value, random), d16, out);
      }
    } else {
      static_assert(Write == kWriteMaster, "16-bit parameters have a master or round stochastically");
      hn::StoreU(value, df, a.master + i);
      StoreF32<ParamT>(df, value, a.param, i);
    }
  }
}

// The steps below update the Lanes() elements at i. The broadcasts (hn::Set) are loop-invariant
// and hoisted by the compiler; they are not kept in a struct because SVE vectors are sizeless.

template <int GradT, int ParamT, int Write>
struct SgdStep {
  static HWY_INLINE void Apply(const OptimArrays& a, const SgdScalars& s, float mult, std::size_t i) {
    const DF df;
    VF g = LoadGrad<GradT>(a, i, mult);
    const VF p = LoadParam<ParamT, Write>(a, i);
    // Skipped when 0, as the reference: 0 * Inf would turn an Inf parameter's gradient into NaN.
    if (s.weight_decay != 0.0f) g = Fma(hn::Set(df, s.weight_decay), p, g);
    VF d = g;
    if (s.momentum != 0.0f) {
      const VF momentum = hn::Set(df, s.momentum);
      const VF buf = s.first_step != 0
                         ? g
                         : Fma(momentum, hn::LoadU(df, a.state0 + i),
                               hn::Mul(hn::Set(df, s.one_minus_dampening), g));
      hn::StoreU(buf, df, a.state0 + i);
      d = s.nesterov != 0 ? Fma(momentum, buf, g) : buf;
    }
    StoreParam<ParamT, Write>(a, i, Fma(hn::Set(df, -s.lr), d, p));
  }
};

template <int GradT, int ParamT, int Write>
struct AdamStep {
  static HWY_INLINE void Apply(const OptimArrays& a, const AdamScalars& s, float mult, std::size_t i) {
    const DF df;
    VF g = LoadGrad<GradT>(a, i, mult);
    const VF p = hn::Mul(LoadParam<ParamT, Write>(a, i), hn::Set(df, s.decay));  // 1 for Adam
    if (s.l2_weight_decay != 0.0f) g = Fma(hn::Set(df, s.l2_weight_decay), p, g);
    const VF m = Fma(hn::Set(df, s.beta1), hn::LoadU(df, a.state0 + i),
                     hn::Mul(hn::Set(df, s.one_minus_beta1), g));
    const VF v = Fma(hn::Mul(hn::Set(df, s.one_minus_beta2), g), g,
                     hn::Mul(hn::Set(df, s.beta2), hn::LoadU(df, a.state1 + i)));
    hn::StoreU(m, df, a.state0 + i);
    hn::StoreU(v, df, a.state1 + i);
    const VF denom = Fma(hn::Sqrt(v), hn::Set(df, s.inv_sqrt_bias_correction2), hn::Set(df, s.eps));
    StoreParam<ParamT, Write>(a, i, Fma(hn::Set(df, -s.step_size), hn::Div(m, denom), p));
  }
};

/// Runs Step over `count` elements: whole vectors in place, then the last partial vector through
/// zero-padded stack copies, so the tail runs the very same vector code (the padding lanes compute
/// on zeros, which cannot trap, and are never copied back).
template <class Step, class Scalars>
void Run(const OptimArrays& arrays, const Scalars& scalars, std::size_t count) {
  // Local copies: the stores through the float arrays could otherwise alias the f32 scalars, and
  // the compiler would reload them (and re-test the option branches) for every vector.
  const OptimArrays a = arrays;
  const Scalars s = scalars;
  const float mult = a.grad_multiplier != nullptr ? *a.grad_multiplier : 1.0f;
  const std::size_t lanes = hn::Lanes(DF());
  std::size_t i = 0;
  for (; i + lanes <= count; i += lanes) Step::Apply(a, s, mult, i);
  if (i == count) return;
  const std::size_t rest = count - i;
  const std::size_t param_size = a.param_dtype == DType::f32 ? 4 : 2;
  const std::size_t grad_size = a.grad_dtype == DType::f32 ? 4 : 2;
  HWY_ALIGN float param[kMaxF32Lanes] = {};
  HWY_ALIGN float grad[kMaxF32Lanes] = {};
  HWY_ALIGN float master[kMaxF32Lanes] = {};
  HWY_ALIGN float state0[kMaxF32Lanes] = {};
  HWY_ALIGN float state1[kMaxF32Lanes] = {};
  HWY_ALIGN std::uint32_t random[kMaxF32Lanes] = {};
  HWY_ALIGN std::uint16_t copy[kMaxF32Lanes] = {};
  OptimArrays t = a;
  if (a.copy != nullptr) t.copy = copy;
  t.param = param;
  t.grad = grad;
  std::memcpy(param, static_cast<const char*>(a.param) + i * param_size, rest * param_size);
  std::memcpy(grad, static_cast<const char*>(a.grad) + i * grad_size, rest * grad_size);
  const auto copy_in = [&](float* buffer, float* source) -> float* {
    if (source == nullptr) return nullptr;
    std::memcpy(buffer, source + i, rest * sizeof(float));
    return buffer;
  };
  t.master = copy_in(master, a.master);
  t.state0 = copy_in(state0, a.state0);
  t.state1 = copy_in(state1, a.state1);
  if (a.random != nullptr) {
    std::memcpy(random, a.random + i, rest * sizeof(std::uint32_t));
    t.random = random;
  }
  Step::Apply(t, s, mult, 0);
  std::memcpy(static_cast<char*>(a.param) + i * param_size, param, rest * param_size);
  if (a.master != nullptr) std::memcpy(a.master + i, master, rest * sizeof(float));
  if (a.copy != nullptr) std::memcpy(static_cast<std::uint16_t*>(a.copy) + i, copy, rest * 2);
  if (a.state0 != nullptr) std::memcpy(a.state0 + i, state0, rest * sizeof(float));
  if (a.state1 != nullptr) std::memcpy(a.state1 + i, state1, rest * sizeof(float));
}

/// Runs Step<GradT, ParamT, Write> for the run-time dtypes and write mode of `a` (the valid
/// combinations only: the dispatcher checked f32 <-> in place, 16-bit <-> master/stochastic).
template <template <int, int, int> class Step, class Scalars, int GradT>
void ByParam(const OptimArrays& a, const Scalars& s, std::size_t count) {
  if (a.param_dtype == DType::f32) return Run<Step<GradT, kF32, kWriteInPlace>>(a, s, count);
  const bool stochastic = a.write == kWriteStochastic;
  if (a.param_dtype == DType::bf16) {
    if (stochastic) return Run<Step<GradT, kBF16, kWriteStochastic>>(a, s, count);
    return Run<Step<GradT, kBF16, kWriteMaster>>(a, s, count);
  }
  if (stochastic) return Run<Step<GradT, kF16, kWriteStochastic>>(a, s, count);
  Run<Step<GradT, kF16, kWriteMaster>>(a, s, count);
}

template <template <int, int, int> class Step, class Scalars>
void ByDTypes(const OptimArrays& a, const Scalars& s, std::size_t count) {
  if (a.grad_dtype == DType::f32) return ByParam<Step, Scalars, kF32>(a, s, count);
  if (a.grad_dtype == DType::bf16) return ByParam<Step, Scalars, kBF16>(a, s, count);
  ByParam<Step, Scalars, kF16>(a, s, count);
}

}  // namespace

// Non-template entry points, one per target (HWY_EXPORT needs plain function names).
void SgdChunk(const OptimArrays& a, const SgdScalars& s, std::size_t count) {
  ByDTypes<SgdStep>(a, s, count);
}
void AdamChunk(const OptimArrays& a, const AdamScalars& s, std::size_t count) {
  ByDTypes<AdamStep>(a, s, count);
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(SgdChunk);
HWY_EXPORT(AdamChunk);

void sgd_update_simd(const OptimArrays& a, const SgdScalars& s, std::size_t count) {
  HWY_DYNAMIC_DISPATCH(SgdChunk)(a, s, count);
}

void adam_update_simd(const OptimArrays& a, const AdamScalars& s, std::size_t count) {
  HWY_DYNAMIC_DISPATCH(AdamChunk)(a, s, count);
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
