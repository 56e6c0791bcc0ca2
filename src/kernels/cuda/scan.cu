// The CUDA running sums (cumsum): the reference's bits. The spec fixes the order (one f32
// addition per element from one end of the row to the other), so the sum itself stays
// sequential; what a warp adds is coalesced loads and stores. One warp per row: the warp loads
// 32 consecutive elements (one per lane), then every lane adds the 32 values in row order (each
// taken from its lane by a shuffle) to the same running sum, so all lanes hold identical bits
// and each keeps the sum at its own element. Rows are independent: 8 per block.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/scan.h"

namespace mixprec::kernels::cuda {
namespace {

__global__ void cumsum_kernel(const void* in, DType din, std::int64_t rows, std::int64_t cols,
                              void* out, DType dout, bool reverse) {
  using Warp = Group<kWarp>;
  const int lane = static_cast<int>(Warp::lane());
  for (std::int64_t r = Warp::first_item(); r < rows; r += Warp::item_stride()) {
    float acc = 0.0f;
    for (std::int64_t base = 0; base < cols; base += kWarp) {
      // k counts along the order of summation; j is the element it names.
      const std::int64_t k = base + lane;
      const std::int64_t j = reverse ? cols - 1 - k : k;
      const float x = k < cols ? load(in, din, r * cols + j) : 0.0f;
      const int valid = cols - base < kWarp ? static_cast<int>(cols - base) : kWarp;
      float mine = 0.0f;
      for (int l = 0; l < valid; ++l) {
        acc += __shfl_sync(kFullWarp, x, l);
        if (l == lane) mine = acc;
      }
      if (k < cols) store(out, dout, r * cols + j, mine);
    }
  }
}

}  // namespace

void cumsum(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
            DType out_dtype, bool reverse) {
  MIXPREC_CHECK(rows >= 0 && cols >= 0, ShapeError, "cumsum",
                "needs rows, cols >= 0, got " << rows << " x " << cols);
  if (rows == 0 || cols == 0) return;
  cumsum_kernel<<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(in, in_dtype, rows, cols,
                                                                     out, out_dtype, reverse);
  check_launch("cumsum");
}

}  // namespace mixprec::kernels::cuda
