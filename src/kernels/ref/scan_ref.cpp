// Reference running sums: one f32 addition per element along each row, rounded once on store.
#include "kernels/scan.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::ref {

void cumsum(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
            DType out_dtype, bool reverse) {
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, "cumsum",
                "needs rows, cols >= 0, got " << rows << " x " << cols);
  dispatch(in_dtype, out_dtype, [&](auto ti, auto to) {
    using TI = decltype(ti);
    using TO = decltype(to);
    const TI* x = static_cast<const TI*>(in);
    TO* y = static_cast<TO*>(out);
    for (std::int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < cols; ++k) {
        const std::int64_t j = reverse ? cols - 1 - k : k;
        acc += static_cast<float>(x[r * cols + j]);
        y[r * cols + j] = TO(acc);
      }
    }
  });
}

}  // namespace mixprec::kernels::ref
