// The cross-entropy argument checks of softmax_checks.h, defined once beside their declarations
// so that every backend (ref, cpu, cuda) links the spec's checks, not another backend's.
#include "kernels/spec/softmax_checks.h"

#include "mixprec/core/error.h"

namespace mixprec::kernels {

void detail::check_cross_entropy_scalars(const char* op, std::int64_t rows, std::int64_t cols,
                                         const std::int64_t* targets, float label_smoothing) {
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, op,
                "negative extent (rows " << rows << ", cols " << cols << ")");
  MIXPREC_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f, ValueError, op,
                "label_smoothing must be in [0, 1], got " << label_smoothing);
  MIXPREC_CHECK(rows == 0 || targets != nullptr, ValueError, op, "targets is null");
}

void detail::check_cross_entropy_target(const char* op, std::int64_t row, std::int64_t target,
                                        std::int64_t cols) {
  MIXPREC_CHECK(target >= 0 && target < cols, ValueError, op,
                "target " << target << " at row " << row << " is out of range [0, " << cols
                          << "); targets must be class indices");
}

void detail::check_cross_entropy_args(const char* op, std::int64_t rows, std::int64_t cols,
                                      const std::int64_t* targets, float label_smoothing) {
  check_cross_entropy_scalars(op, rows, cols, targets, label_smoothing);
  for (std::int64_t r = 0; r < rows; ++r) check_cross_entropy_target(op, r, targets[r], cols);
}

}  // namespace mixprec::kernels
