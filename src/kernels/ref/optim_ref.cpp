// Scalar reference of the fused optimizer updates: the specification every vector kernel must
// match bit for bit. The per-element steps are kernels/spec/optim_math.h (shared with the CUDA
// kernels): each one correctly rounded operation (std::fma, *, /, sqrt), no expression of the
// form a * b + c, so compiler contraction cannot change a result.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/optim.h"
#include "kernels/spec/optim_math.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels {
namespace {

/// Element i's random bits, read only where write_param rounds stochastically (a 16-bit
/// parameter without a master).
std::uint32_t random_of(const OptimArrays& a, std::size_t i) {
  return a.param_dtype != DType::f32 && a.write == kWriteStochastic ? a.random[i] : 0u;
}

template <DType GradT>
void sgd_loop(const OptimArrays& a, const SgdScalars& s, std::size_t count) {
  const float m = optim_math::grad_multiplier_of(a);
  for (std::size_t i = 0; i < count; ++i) {
    optim_math::write_param(a, i, optim_math::sgd_value<GradT>(a, s, i, m), random_of(a, i));
  }
}

template <DType GradT>
void adam_loop(const OptimArrays& a, const AdamScalars& s, std::size_t count) {
  const float m = optim_math::grad_multiplier_of(a);
  for (std::size_t i = 0; i < count; ++i) {
    optim_math::write_param(a, i, optim_math::adam_value<GradT>(a, s, i, m), random_of(a, i));
  }
}

}  // namespace

void sgd_update_ref(const OptimArrays& a, const SgdScalars& s, std::size_t count) {
  switch (a.grad_dtype) {
    case DType::f32: sgd_loop<DType::f32>(a, s, count); break;
    case DType::bf16: sgd_loop<DType::bf16>(a, s, count); break;
    default: sgd_loop<DType::f16>(a, s, count); break;
  }
}

void adam_update_ref(const OptimArrays& a, const AdamScalars& s, std::size_t count) {
  switch (a.grad_dtype) {
    case DType::f32: adam_loop<DType::f32>(a, s, count); break;
    case DType::bf16: adam_loop<DType::bf16>(a, s, count); break;
    default: adam_loop<DType::f16>(a, s, count); break;
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
void sgd_update_batch(const SgdBatch& batch) {
  for (int r = 0; r < batch.size; ++r) {
    const auto& run = batch.runs[r];
    ref_entry(&sgd_update_ref, run.arrays, run.scalars, run.count, run.rng_stream);
  }
}
void adam_update_batch(const AdamBatch& batch) {
  for (int r = 0; r < batch.size; ++r) {
    const auto& run = batch.runs[r];
    ref_entry(&adam_update_ref, run.arrays, run.scalars, run.count, run.rng_stream);
  }
}
}  // namespace ref

}  // namespace mixprec::kernels
