#pragma once
/// Reduction kernels on raw contiguous buffers viewed as [outer, n, inner], reducing the middle
/// axis. Every reduction accumulates in f32 whatever the dtype (a bf16 running sum stops growing
/// at 256). kernels::ref:: is the spec; kernels:: dispatches to vector code where it can.
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/dtype_visit.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// sum, mean, max, min, amax (max |x|), norm1 (sum |x|), norm2 (sqrt of sum x^2).
enum class ReduceOp : std::uint8_t { sum, mean, max, min, amax, norm1, norm2 };
const char* name(ReduceOp op);

namespace ref {
/// out[o, i] = reduce_k in[o, k, i] for o < outer, k < n, i < inner; out has outer*inner
/// elements of out_dtype. n must be >= 1 for max/min/amax.
void reduce(ReduceOp op, const void* in, DType in_dtype, std::int64_t outer, std::int64_t n,
            std::int64_t inner, void* out, DType out_dtype);
}  // namespace ref

/// One tensor of a multi-tensor reduction: `count` contiguous elements of `dtype` at `data`.
struct ReduceRun {
  const void* data;
  DType dtype;
  std::int64_t count;
};

/// The tensors one multi-tensor reduction reduces, each whole to one f32 value: the gradient
/// norm's per-tensor norms in one call. Passed by value to a device kernel (128 runs are 3 KB of
/// kernel parameters). A trivial aggregate, created value-initialised.
inline constexpr int kReduceBatchRuns = 128;
struct ReduceBatch {
  ReduceRun runs[kReduceBatchRuns];
  int size;     ///< runs used, 0..kReduceBatchRuns
  ReduceOp op;
  float* out;   ///< device f32 array: out[r] gets run r's value

  /// Calls f(DType) once for each distinct dtype of the runs, in first-seen order.
  template <class F>
  void for_each_dtype(F&& f) const {
    DistinctDTypes<F> distinct{f};
    for (int r = 0; r < size; ++r) distinct(runs[r].dtype);
  }
};

namespace ref {
/// out[r] = reduce(op, run r, outer 1, n = count, inner 1) for every run, in one call (one
/// launch pair on a GPU, every run's chunks over all threads on a CPU), each value as that
/// backend's single reduce gives it up to summation order (the cpu backend: the same bits).
/// count must be >= 1 for max/min/amax.
void reduce_batch(const ReduceBatch& batch);
}  // namespace ref

namespace detail {
/// Throws ShapeError (a negative extent) or ValueError (an empty axis for max/min/amax, which
/// have no identity), naming op: every backend's reduce checks its arguments with this.
void check_reduce_args(ReduceOp op, std::int64_t outer, std::int64_t n, std::int64_t inner);
}  // namespace detail

/// The reduce kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_REDUCE_KERNELS(X) X(reduce) X(reduce_batch)
MIXPREC_REDUCE_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
