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

void detail::check_cross_entropy_alias(const char* op, const void* logits, DType dtype,
                                       const void* dlogits, DType dlogits_dtype,
                                       std::int64_t rows, std::int64_t cols) {
  const auto at = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  if (logits == dlogits) {
    MIXPREC_CHECK(dtype == dlogits_dtype, ValueError, op,
                  "in place (dlogits is logits) needs one dtype, got logits "
                      << name(dtype) << " and dlogits " << name(dlogits_dtype));
    return;
  }
  const std::uintptr_t n = static_cast<std::uintptr_t>(rows * cols);
  const std::uintptr_t a0 = at(logits), a1 = a0 + n * size_of(dtype);
  const std::uintptr_t b0 = at(dlogits), b1 = b0 + n * size_of(dlogits_dtype);
  MIXPREC_CHECK(n == 0 || a1 <= b0 || b1 <= a0, ValueError, op,
                "dlogits overlaps logits without being them; pass the same pointer to work in "
                "place, else disjoint buffers");
}

}  // namespace mixprec::kernels
