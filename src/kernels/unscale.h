#pragma once
/// Fused gradient unscale + non-finite check (GradScaler::unscale): one pass that multiplies each
/// gradient element by the inverse loss scale and reports whether any element was Inf or NaN, and
/// on request also measures the largest finite |unscaled gradient| (amax, for predictive loss
/// scaling) in the same pass, so it costs no second read of the gradients.
/// kernels::unscale_inplace runs on the active backend (kernels/backend.h).
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/dtype_visit.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

// --- Scalar reference (unscale_ref.cpp): the specification. `in` may equal `out`. ---
//
// amax (every function): nullptr, or a float holding a non-negative number (not NaN) that is
// raised to the largest |out[i]| (widened to f32) over the elements whose out[i] is finite. Inf and
// NaN outputs never enter it (the verdict reports them), so "max-into" calls over consecutive
// chunks combine in any order to the same value, and -0 counts as 0.

/// out[i] = in[i] * inv (one f32 rounding) for n f32 elements; true if any in[i] or out[i] is
/// Inf or NaN (an overflowing product counts, so does an Inf/NaN input).
bool unscale_f32_ref(const float* in, float* out, std::size_t n, float inv,
                     float* amax = nullptr) noexcept;
/// The same for n bf16 (dtype DType::bf16) or f16 (DType::f16) bit patterns: out[i] is
/// widen(in[i]) * inv in f32, rounded to nearest even to the dtype; true if any widened input or
/// rounded output is Inf or NaN (so a product above the dtype's max counts as an overflow).
bool unscale_16bit_ref(const std::uint16_t* in, std::uint16_t* out, std::size_t n, float inv,
                       DType dtype, float* amax = nullptr) noexcept;

// --- Entry point (on the active backend): threads above a size threshold, verbose log. ---

/// Multiplies n contiguous elements of `dtype` (f32, bf16 or f16) in place by inv (finite, non-zero);
/// returns whether any element was Inf/NaN before or after, and raises *amax (if not null) as the
/// reference does. The cpu backend runs the Highway kernel of the best target allowed (every
/// dtype). Neither the verdict nor amax depends on the target or thread count.
/// Host memory only (tests, benchmarks): the verdict comes back as a bool.
bool unscale_inplace(void* data, DType dtype, std::size_t n, float inv, float* amax = nullptr);

/// One gradient of a multi-tensor unscale: `count` elements of `dtype` (f32, bf16 or f16) at `data`.
struct UnscaleRun {
  void* data;
  DType dtype;
  std::uint64_t count;
};

/// The gradients one multi-tensor unscale call multiplies, with the call's common arguments.
/// Passed by value to a device kernel: 128 runs are 3 KB of kernel parameters, so GPT-2-small's
/// 148 gradients take 2 launches instead of 148 (296 with amax). A trivial aggregate, created
/// value-initialised as the optim.h descriptors are.
inline constexpr int kUnscaleBatchRuns = 128;
struct UnscaleBatch {
  UnscaleRun runs[kUnscaleBatchRuns];
  int size;          ///< runs used, 0..kUnscaleBatchRuns
  float inv;         ///< finite, non-zero
  float* found_inf;  ///< device f32 flag, set to 1 if any element of any run was Inf/NaN
  float* amax;       ///< null, or a device f32 raised over every run (as unscale's amax)

  /// Calls f(DType) once for each distinct dtype of the runs, in first-seen order.
  template <class F>
  void for_each_dtype(F&& f) const {
    DistinctDTypes<F> distinct{f};
    for (int r = 0; r < size; ++r) distinct(runs[r].dtype);
  }
};

namespace ref {
/// The backend entry, for memory on any device: as unscale_inplace, but the verdict is written
/// where the data lives: *found_inf (an f32 flag in device memory) is set to 1 if any element
/// was Inf/NaN and left alone otherwise, so a loop over every parameter raises one flag and one
/// amax and the host reads both once per step (PyTorch's
/// _amp_foreach_non_finite_check_and_unscale_). found_inf must not be null; amax may be.
void unscale(void* data, DType dtype, std::size_t n, float inv, float* found_inf, float* amax);
/// unscale over every run of the batch (the same element bits, the same flag and amax as one
/// unscale call per run), in one call: one launch on a GPU, all runs over the threads on a CPU.
/// The runs must not overlap.
void unscale_batch(const UnscaleBatch& batch);
}  // namespace ref

namespace ref {
bool unscale_inplace(void* data, DType dtype, std::size_t n, float inv, float* amax = nullptr);
}  // namespace ref

namespace cpu {
bool unscale_inplace(void* data, DType dtype, std::size_t n, float inv, float* amax = nullptr);
}  // namespace cpu

/// The unscale kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_UNSCALE_KERNELS(X) X(unscale) X(unscale_batch)
MIXPREC_UNSCALE_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
