#pragma once
/// Argument checks shared by the reference and dispatching cross-entropy kernels.
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::detail {

/// Throws ShapeError for negative rows/cols and ValueError ("<op>: ...") for a target outside
/// [0, cols) or a label_smoothing outside [0, 1]; op is "cross_entropy" or its backward.
/// Reads targets on the host: check_cross_entropy_scalars and check_cross_entropy_target are its
/// two halves, for a backend whose targets live in device memory.
void check_cross_entropy_args(const char* op, std::int64_t rows, std::int64_t cols,
                              const std::int64_t* targets, float label_smoothing);

/// Every check of check_cross_entropy_args that does not read the targets.
void check_cross_entropy_scalars(const char* op, std::int64_t rows, std::int64_t cols,
                                 const std::int64_t* targets, float label_smoothing);

/// ValueError naming op, the row and the target if the target is outside [0, cols).
void check_cross_entropy_target(const char* op, std::int64_t row, std::int64_t target,
                                std::int64_t cols);

/// ValueError naming op unless dlogits ([rows, cols] of dlogits_dtype) is either logits itself
/// with the same dtype (in place) or disjoint from it ([rows, cols] of dtype), and the same for
/// loss_per_row against grad_per_row (f32 [rows] each). Compares addresses only, so it reads
/// no device memory.
void check_cross_entropy_alias(const char* op, const void* logits, DType dtype,
                               const void* dlogits, DType dlogits_dtype, std::int64_t rows,
                               std::int64_t cols, const float* grad_per_row,
                               const float* loss_per_row);

}  // namespace mixprec::kernels::detail
