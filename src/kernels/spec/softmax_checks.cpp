// The cross-entropy argument checks of softmax_checks.h, defined once beside their declarations
// so that every backend (ref, cpu, cuda) links the spec's checks, not another backend's.
#include "kernels/spec/softmax_checks.h"

#include <cstddef>
#include <cstdint>

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

namespace {
/// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}
}  // namespace

void detail::check_cross_entropy_alias(const char* op, const void* logits, DType dtype,
                                       const void* dlogits, DType dlogits_dtype,
                                       std::int64_t rows, std::int64_t cols,
                                       const float* grad_per_row, const float* loss_per_row) {
  const auto n = static_cast<std::size_t>(rows * cols);
  if (logits == dlogits) {
    MIXPREC_CHECK(dtype == dlogits_dtype, ValueError, op,
                  "in place (dlogits is logits) needs one dtype, got logits "
                      << name(dtype) << " and dlogits " << name(dlogits_dtype));
  } else {
    MIXPREC_CHECK(!overlap(logits, n * size_of(dtype), dlogits, n * size_of(dlogits_dtype)),
                  ValueError, op,
                  "dlogits overlaps logits without being them; pass the same pointer to work "
                  "in place, else disjoint buffers");
  }
  const auto row_bytes = static_cast<std::size_t>(rows) * sizeof(float);
  MIXPREC_CHECK(grad_per_row == loss_per_row ||
                    !overlap(grad_per_row, row_bytes, loss_per_row, row_bytes),
                ValueError, op,
                "loss_per_row overlaps grad_per_row without being it; pass the same pointer, "
                "else disjoint buffers");
}

}  // namespace mixprec::kernels
