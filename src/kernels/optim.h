#pragma once
/// Fused optimizer update kernels: one pass per element that reads the parameter (or its fp32
/// master), the gradient (f32/bf16/f16) and the fp32 state, and writes the state, the master and
/// the parameter. Plain declarations only: the Highway kernel file (cpu/optim_simd.cpp, compiled
/// once per target) includes this header outside its per-target namespace, so the descriptors'
/// member templates below (for_each_dtype) are never instantiated with a target's ISA.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/dtype_visit.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// How the new parameter value reaches the parameter.
enum OptimWrite : int {
  kWriteInPlace = 0,    ///< f32 parameter: updated in place, no master
  kWriteMaster = 1,     ///< 16-bit parameter with fp32 master: master updated, param = RNE(master)
  kWriteStochastic = 2  ///< 16-bit parameter, no master: update in f32, stochastic rounding back
};

// The structs below are trivial aggregates on purpose (no default member initializers): they
// then have no constructor functions at all, so none can be emitted with a target's ISA. Create
// them value-initialised (`OptimArrays a{};`): every pointer null, every number 0.

/// The arrays of one contiguous run of `count` elements (all pointers already offset to it).
struct OptimArrays {
  void* param;                   ///< param_dtype elements
  float* master;                 ///< fp32 master (kWriteMaster only)
  const void* grad;              ///< grad_dtype elements
  float* state0;                 ///< SGD momentum buffer / Adam exp_avg (null for SGD without momentum)
  float* state1;                 ///< Adam exp_avg_sq
  const std::uint32_t* random;   ///< 32 random bits per element (kWriteStochastic only)
  DType param_dtype;             ///< f32, bf16 or f16
  DType grad_dtype;              ///< f32, bf16 or f16
  int write;                     ///< OptimWrite
  /// kWriteInPlace only: also store the new value rounded to nearest even in copy_dtype here
  /// (the 16-bit copy of the weight autocast reads next step, written in the same pass), or null.
  void* copy;
  DType copy_dtype;              ///< bf16 or f16 (with copy)
  /// Null, or one f32 in the gradient's memory that multiplies every gradient element before the
  /// update uses it: g = round_to_grad_dtype(widen(g) * m), skipped when m is exactly 1. Both
  /// roundings are those of multiplying the gradient in a pass of its own (the gradient-clipping
  /// coefficient, which the update folds in instead of a read and write of every gradient).
  /// The gradient array itself is never written.
  const float* grad_multiplier;

  /// Calls f(DType) for each dtype the arrays carry: param_dtype, grad_dtype, and copy_dtype
  /// when there is a copy (what a backend's supports() and the fallback's log see).
  template <class F>
  void for_each_dtype(F&& f) const {
    f(param_dtype);
    f(grad_dtype);
    if (copy != nullptr) f(copy_dtype);
  }
};

/// SGD scalars, already rounded to f32 by the caller (PyTorch computes them in double too).
/// g' = fma(weight_decay, p, g); buf = first_step ? g' : fma(momentum, buf, one_minus_dampening*g');
/// d = nesterov ? fma(momentum, buf, g') : buf (g' when momentum == 0); p = fma(-lr, d, p).
struct SgdScalars {
  float lr;
  float momentum;             ///< 0: no buffer (state0 unused)
  float one_minus_dampening;
  float weight_decay;         ///< 0: skipped (0 * Inf would make NaN)
  int nesterov;
  int first_step;             ///< the buffer is initialised to g' (PyTorch's clone)
};

/// Adam/AdamW scalars, computed in double by the caller and rounded to f32:
/// p = p * decay (AdamW); g' = fma(weight_decay, p, g) (Adam L2);
/// m = fma(beta1, m, one_minus_beta1 * g'); v = fma(one_minus_beta2 * g', g', beta2 * v);
/// denom = fma(sqrt(v), inv_sqrt_bias_correction2, eps); p = fma(-step_size, m / denom, p).
struct AdamScalars {
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float eps;
  float l2_weight_decay;            ///< Adam: added to the gradient (0: skipped); 0 for AdamW
  float decay;                      ///< AdamW: 1 - lr * weight_decay; exactly 1 for Adam
  float step_size;                  ///< lr / (1 - beta1^t)
  float inv_sqrt_bias_correction2;  ///< 1 / sqrt(1 - beta2^t)
};

/// One parameter's share of a multi-tensor update: its arrays, its scalars (a parameter group's
/// learning rate and weight decay, its own step count), its element count and its RNG stream.
template <class Scalars>
struct OptimRun {
  OptimArrays arrays;
  Scalars scalars;
  std::uint64_t count;
  std::uint64_t rng_stream;
};

/// The runs one multi-tensor call updates. Passed by value to a device kernel (PyTorch's
/// multi_tensor_apply passes its tensor lists the same way): 48 Adam runs are about 7 KB, inside
/// the 32 KB of kernel parameters CUDA 12.1+ allows on sm_70 and newer, so GPT-2-small's 148
/// parameters take 4 launches instead of 148, with no upload of a table before each.
inline constexpr int kOptimBatchRuns = 48;
template <class Scalars>
struct OptimBatch {
  OptimRun<Scalars> runs[kOptimBatchRuns];
  int size;  ///< runs used, 1..kOptimBatchRuns

  /// Calls f(DType) once for each distinct dtype of the runs' arrays, in first-seen order.
  template <class F>
  void for_each_dtype(F&& f) const {
    DistinctDTypes<F> distinct{f};
    for (int r = 0; r < size; ++r) runs[r].arrays.for_each_dtype(distinct);
  }
};
using SgdBatch = OptimBatch<SgdScalars>;
using AdamBatch = OptimBatch<AdamScalars>;

// --- Scalar reference loops (optim_ref.cpp): the specification. ---

/// One SGD update of `count` elements.
void sgd_update_ref(const OptimArrays& a, const SgdScalars& s, std::size_t count);
/// One Adam/AdamW update of `count` elements.
void adam_update_ref(const OptimArrays& a, const AdamScalars& s, std::size_t count);

// --- Entry points (on the active backend): chunks, threads, random bits. ---

namespace ref {
/// Applies an SGD update to n elements starting at `a`; for kWriteStochastic, element i rounds
/// with random_bits(rng_stream, i) (random.h), whatever the ISA or thread count.
void sgd_update(const OptimArrays& a, const SgdScalars& s, std::size_t n, std::uint64_t rng_stream);
/// Applies an Adam/AdamW update to n elements (random bits as for sgd_update).
void adam_update(const OptimArrays& a, const AdamScalars& s, std::size_t n,
                 std::uint64_t rng_stream);
/// Every run of the batch, each exactly as sgd_update(run.arrays, run.scalars, run.count,
/// run.rng_stream) would update it (the same bits), in one call: one launch on a GPU, and on a
/// CPU the elements of all runs spread over the threads together (many small tensors, the
/// biases and norms, no longer run one by one on one thread). The runs must not overlap.
void sgd_update_batch(const SgdBatch& batch);
/// Adam/AdamW over every run of the batch, as adam_update would (the same bits).
void adam_update_batch(const AdamBatch& batch);
}  // namespace ref

/// The optim kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_OPTIM_KERNELS(X) X(sgd_update) X(adam_update) X(sgd_update_batch) X(adam_update_batch)
MIXPREC_OPTIM_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
