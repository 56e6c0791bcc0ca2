#pragma once
/// Argument checks shared by the reference and dispatching cross-entropy kernels.
#include <cstdint>

namespace mixprec::kernels::detail {

/// Throws ShapeError for negative rows/cols and ValueError ("<op>: ...") for a target outside
/// [0, cols) or a label_smoothing outside [0, 1]; op is "cross_entropy" or its backward.
void check_cross_entropy_args(const char* op, std::int64_t rows, std::int64_t cols,
                              const std::int64_t* targets, float label_smoothing);

}  // namespace mixprec::kernels::detail
