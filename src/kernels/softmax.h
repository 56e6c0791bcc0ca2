#pragma once
/// Row-wise softmax / log-softmax and cross-entropy on raw contiguous [rows, cols] buffers.
/// Exponentials and sums are computed in f32 with the row max subtracted first (log-sum-exp),
/// whatever the storage dtype. kernels::ref:: is the spec; kernels:: dispatches.
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// out = softmax(in) (or log_softmax when log is true) along each row of cols elements.
void softmax(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
             DType out_dtype, bool log);
/// Gradient of softmax / log-softmax given its output y and the incoming gradient dy:
/// softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy).
void softmax_backward(const void* y, DType y_dtype, const void* dy, DType dy_dtype,
                      std::int64_t rows, std::int64_t cols, void* dx, DType dx_dtype, bool log);
/// Per-row cross-entropy of logits [rows, cols] against class indices targets[rows] (each in
/// [0, cols), else ValueError), with label smoothing s: loss = -(1-s)*logp[t] - s/cols*sum(logp).
/// loss_per_row is f32 [rows].
void cross_entropy(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing, float* loss_per_row);
/// dlogits[r, c] = grad_per_row[r] * (softmax(logits)[r, c] - q[r, c]), q the smoothed one-hot
/// target ((1-s) at the target plus s/cols everywhere). grad_per_row is f32 [rows].
void cross_entropy_backward(const void* logits, DType dtype, std::int64_t rows,
                            std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                            const float* grad_per_row, void* dlogits, DType dlogits_dtype);
/// cross_entropy and cross_entropy_backward in one pass over each row (llm.c's fused classifier):
/// loss_per_row (f32 [rows]) as cross_entropy writes it and dlogits as cross_entropy_backward
/// writes it given grad_per_row (f32 [rows], the same memory as the logits), bit for bit on
/// every backend, so a forward that knows the gradient the loss will receive needs no second
/// read of the logits in backward. dlogits may be logits itself (in place, one dtype), and
/// loss_per_row may be grad_per_row: every element is read before it is written; a partial
/// overlap is a ValueError.
void cross_entropy_fused(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                         const std::int64_t* targets, float label_smoothing,
                         const float* grad_per_row, float* loss_per_row, void* dlogits,
                         DType dlogits_dtype);
/// x[i] = round(widen(x[i]) * (*num / *den)) over n elements of dtype (the quotient in f32, the
/// product rounded once to dtype), unless *num and *den have the same bits: then x is left as it
/// is and the kernel returns at once. num and den are f32 scalars in x's memory, so the
/// decision costs no host read: the fused cross-entropy's backward, which saved the gradient
/// for a promised dy (den) and receives dy (num).
void rescale_unless_equal(void* x, DType dtype, std::int64_t n, const float* num,
                          const float* den);
}  // namespace ref

/// The softmax kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_SOFTMAX_KERNELS(X) X(softmax) X(softmax_backward) X(cross_entropy) \
  X(cross_entropy_backward) X(cross_entropy_fused) X(rescale_unless_equal)
MIXPREC_SOFTMAX_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
