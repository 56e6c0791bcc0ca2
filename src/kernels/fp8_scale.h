#pragma once
/// The fp8 training recipes' device kernels (docs/fp8.md, "Recipes"): the scaled, saturating
/// cast that measures its input's amax in the same pass (and its fused form that also writes
/// the transposed bytes), and the scale update from an amax
/// history. Scales, amaxes and histories are device memory (pointers), so a training step
/// never reads them on the host. The per-element math is kernels/spec/fp8_scale_math.h, shared by
/// every backend. kernels::<name> runs on the active backend.
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// y[i] = sat_fp8(x[i] * (*scale)) for n contiguous elements: x of dtype x_dtype (f32, bf16,
/// f16; widened exactly), the product rounded to f32, then one round-to-nearest-even to
/// `format` (f8e4m3 or f8e5m2) in OCP's saturating mode (fp8_scale_math.h: finite overflow and
/// +-Inf clip to +-max, NaN stays NaN). *scale is read on the device. When amax is not null,
/// *amax is set (not raised) to max |x[i]| over the unscaled input: NaN if any element is NaN,
/// else Inf if any is Inf, 0 for n = 0; the max of bit patterns, so the same on every backend
/// and thread count. y may be null: only the amax is measured (current scaling's first pass).
void fp8_scaled_cast(const void* x, DType x_dtype, void* y, DType format, std::int64_t n,
                     const float* scale, float* amax);

/// fp8_scaled_cast of a contiguous [rows, cols] matrix x that writes the bytes twice in one
/// pass over x: row-major into y [rows, cols] (may be null) and transposed into yt [cols, rows]
/// (yt[c * rows + r] = y[r * cols + c]), each byte exactly what fp8_scaled_cast writes for that
/// element, and *amax (when not null) set by fp8_scaled_cast's rules. The fp8 Linear's backward
/// GEMMs read operands k-contiguous, so its casts write the transposed copies they need here
/// instead of transposing the quantised bytes in a second pass (Transformer Engine's fused
/// cast-transpose). A null y keeps only the transposed copy; *scale must be given.
void fp8_scaled_cast_transpose(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                               void* y, void* yt, DType format, const float* scale, float* amax);

/// One step of an amax history: `history` is device f32 [len], newest first (a shifted window,
/// not a ring: no index to keep or checkpoint, and len is small). If *amax is finite the
/// window shifts by one (the oldest drops out), history[0] = *amax, and *scale becomes
/// 2^(floor(log2(max / m)) - margin) for m the largest entry of the window and max the format's
/// largest finite value (exponent clamped to [-126, 127]); when m is 0 the scale is kept.
/// If *amax is NaN or Inf, history and scale are left untouched (the history is not poisoned)
/// and *found_inf (device f32; may be null) is set to 1, so the GradScaler-style skip sees it.
/// len = 1 is current scaling. len >= 1 and 0 <= margin <= 64 (checked).
void fp8_scale_update(float* history, std::int64_t len, const float* amax, float* scale,
                      DType format, int margin, float* found_inf);
}  // namespace ref

/// The fp8 recipe kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_FP8_SCALE_KERNELS(X) \
  X(fp8_scaled_cast) X(fp8_scaled_cast_transpose) X(fp8_scale_update)
MIXPREC_FP8_SCALE_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
