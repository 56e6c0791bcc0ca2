// cpu running sums. A row's sum is a chain of dependent f32 additions (the order is the
// contract), so the vector units work across rows instead: rows are split over threads in fixed
// groups, each row is widened to f32 by the vector conversion, summed in order, and narrowed
// back by the vector conversion. Results never depend on the thread count or the SIMD target.
#include <algorithm>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/scan.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cpu {

void cumsum(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
            DType out_dtype, bool reverse) {
  const std::string label = dtype_label(in_dtype, out_dtype);
  require_compute_dtype("cumsum", in_dtype);  // fp8 calls run the reference
  require_compute_dtype("cumsum", out_dtype);
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, "cumsum",
                "needs rows, cols >= 0, got " << rows << " x " << cols);
  log_simd("cumsum", label);
  if (rows == 0 || cols == 0) return;
  const std::int64_t per = std::max<std::int64_t>(1, 16384 / cols);  // rows per task
  const std::int64_t tasks = (rows + per - 1) / per;
  parallel_for(tasks, rows * cols >= kParallelMinWork, [&](std::int64_t t) {
    thread_local std::vector<float> row;
    row.resize(static_cast<std::size_t>(cols));
    const auto n = static_cast<std::size_t>(cols);
    for (std::int64_t r = t * per; r < std::min(rows, (t + 1) * per); ++r) {
      convert(at(in, in_dtype, r * cols), in_dtype, row.data(), DType::f32, n);
      float acc = 0.0f;
      if (reverse) {
        for (std::size_t k = n; k-- > 0;) row[k] = acc += row[k];
      } else {
        for (std::size_t k = 0; k < n; ++k) row[k] = acc += row[k];
      }
      convert(row.data(), DType::f32, at(out, out_dtype, r * cols), out_dtype, n);
    }
  });
}

}  // namespace mixprec::kernels::cpu
