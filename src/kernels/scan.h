#pragma once
/// Running sums along the last dimension (cumsum and its backward, the reverse running sum),
/// as backend kernels. The sum runs in f32 from the first element of a row to the last (or the
/// last to the first when reversed), one addition per element, so every backend gives the same
/// bits; the result is rounded once to the output dtype. An f32 running sum: a bf16 one would
/// stop growing at 256. kernels::ref:: is the spec; kernels:: dispatches.
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// out[r, j] = in[r, 0] + ... + in[r, j] (reverse: in[r, j] + ... + in[r, cols - 1]) for
/// `rows` contiguous rows of `cols` elements; in and out may have different compute dtypes.
void cumsum(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
            DType out_dtype, bool reverse);
}  // namespace ref

/// The scan kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_SCAN_KERNELS(X) X(cumsum)
MIXPREC_SCAN_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
