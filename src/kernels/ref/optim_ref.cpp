// Scalar reference of the fused optimizer updates: the specification every vector kernel must
// match bit for bit. Each step is one correctly rounded operation (std::fma, *, /, sqrt) and no
// expression has the form a * b + c, so compiler contraction cannot change a result.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/optim.h"
#include "mixprec/core/convert.h"
#include "mixprec/core/half.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels {
namespace {

/// Gradient element i widened to f32 (exact).
template <int GradT>
float load_grad(const void* grad, std::size_t i) {
  if constexpr (GradT == kOptimF32) {
    return static_cast<const float*>(grad)[i];
  } else if constexpr (GradT == kOptimBF16) {
    return bf16_bits_to_f32(static_cast<const std::uint16_t*>(grad)[i]);
  } else {
    return f16_bits_to_f32(static_cast<const std::uint16_t*>(grad)[i]);
  }
}

/// The f32 value the update starts from: the master if there is one, else the parameter.
float read_param(const OptimArrays& a, std::size_t i) {
  if (a.write == kWriteMaster) return a.master[i];
  if (a.param_dtype == kOptimF32) return static_cast<const float*>(a.param)[i];
  const std::uint16_t bits = static_cast<const std::uint16_t*>(a.param)[i];
  return a.param_dtype == kOptimBF16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

/// Stores the new value: in place (f32), to the master plus its RNE 16-bit copy, or with
/// stochastic rounding from this element's random bits.
void write_param(const OptimArrays& a, std::size_t i, float value) {
  if (a.param_dtype == kOptimF32) {
    static_cast<float*>(a.param)[i] = value;
    if (a.copy != nullptr) {
      static_cast<std::uint16_t*>(a.copy)[i] =
          a.copy_dtype == kOptimBF16 ? f32_to_bf16_bits(value) : f32_to_f16_bits(value);
    }
    return;
  }
  auto* bits = static_cast<std::uint16_t*>(a.param);
  const bool bf16 = a.param_dtype == kOptimBF16;
  if (a.write == kWriteStochastic) {
    bits[i] = bf16 ? f32_to_bf16_bits_stochastic(value, a.random[i])
                   : f32_to_f16_bits_stochastic(value, a.random[i]);
    return;
  }
  if (a.write == kWriteMaster) a.master[i] = value;
  bits[i] = bf16 ? f32_to_bf16_bits(value) : f32_to_f16_bits(value);
}

template <int GradT>
void sgd_loop(const OptimArrays& a, const SgdScalars& s, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    float g = load_grad<GradT>(a.grad, i);
    const float p = read_param(a, i);
    // Skipped when 0, as PyTorch does: 0 * Inf would turn an Inf parameter's gradient into NaN.
    if (s.weight_decay != 0.0f) g = std::fma(s.weight_decay, p, g);
    float d = g;
    if (s.momentum != 0.0f) {
      const float buf =
          s.first_step ? g : std::fma(s.momentum, a.state0[i], s.one_minus_dampening * g);
      a.state0[i] = buf;
      d = s.nesterov ? std::fma(s.momentum, buf, g) : buf;
    }
    write_param(a, i, std::fma(-s.lr, d, p));
  }
}

template <int GradT>
void adam_loop(const OptimArrays& a, const AdamScalars& s, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    float g = load_grad<GradT>(a.grad, i);
    const float p = read_param(a, i) * s.decay;  // decay is exactly 1 for Adam
    if (s.l2_weight_decay != 0.0f) g = std::fma(s.l2_weight_decay, p, g);
    const float m = std::fma(s.beta1, a.state0[i], s.one_minus_beta1 * g);
    const float v = std::fma(s.one_minus_beta2 * g, g, s.beta2 * a.state1[i]);
    a.state0[i] = m;
    a.state1[i] = v;
    const float denom = std::fma(std::sqrt(v), s.inv_sqrt_bias_correction2, s.eps);
    write_param(a, i, std::fma(-s.step_size, m / denom, p));
  }
}

}  // namespace

void sgd_update_ref(const OptimArrays& a, const SgdScalars& s, std::size_t count) {
  switch (a.grad_dtype) {
    case kOptimF32: sgd_loop<kOptimF32>(a, s, count); break;
    case kOptimBF16: sgd_loop<kOptimBF16>(a, s, count); break;
    default: sgd_loop<kOptimF16>(a, s, count); break;
  }
}

void adam_update_ref(const OptimArrays& a, const AdamScalars& s, std::size_t count) {
  switch (a.grad_dtype) {
    case kOptimF32: adam_loop<kOptimF32>(a, s, count); break;
    case kOptimBF16: adam_loop<kOptimBF16>(a, s, count); break;
    default: adam_loop<kOptimF16>(a, s, count); break;
  }
}

namespace {

/// The reference entry point: one thread, element i rounding with random_bits(stream, i), each
/// random bit computed by the scalar Philox of random.h.
template <class Scalars>
void ref_entry(void (*loop)(const OptimArrays&, const Scalars&, std::size_t), const OptimArrays& a,
               const Scalars& s, std::size_t n, std::uint64_t stream) {
  if (a.write != kWriteStochastic) return loop(a, s, n);
  std::vector<std::uint32_t> random(n);
  for (std::size_t i = 0; i < n; ++i) random[i] = random_bits(stream, i);
  OptimArrays with_bits = a;
  with_bits.random = random.data();
  loop(with_bits, s, n);
}

}  // namespace

namespace ref {
void sgd_update(const OptimArrays& a, const SgdScalars& s, std::size_t n, std::uint64_t rng_stream) {
  ref_entry(&sgd_update_ref, a, s, n, rng_stream);
}
void adam_update(const OptimArrays& a, const AdamScalars& s, std::size_t n,
                 std::uint64_t rng_stream) {
  ref_entry(&adam_update_ref, a, s, n, rng_stream);
}
}  // namespace ref

}  // namespace mixprec::kernels
