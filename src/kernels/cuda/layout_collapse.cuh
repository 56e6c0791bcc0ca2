#pragma once
// Fewer dimensions for a strided Layout (launch.cuh) with the same offsets: a contiguous copy
// becomes rank 1, a broadcast mask over [B, H, T, T] rank 2, so each element costs fewer 64-bit
// divisions. Included by .cu files only.
#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace mixprec::kernels::cuda {

/// l with its dimensions of size 1 dropped and each dimension merged into the one inside it
/// where both operands step through the pair as through one dimension (stride[d] ==
/// stride[d + 1] * shape[d + 1]): offset(collapsed(l), k, i) == offset(l, k, i) for every
/// row-major element index i. For a layout of at least one element.
inline Layout collapsed(const Layout& l) {
  Layout c;
  for (int d = 0; d < l.rank; ++d) {
    if (l.shape[d] == 1) continue;
    const int last = c.rank - 1;
    if (last >= 0 && c.stride[0][last] == l.stride[0][d] * l.shape[d] &&
        c.stride[1][last] == l.stride[1][d] * l.shape[d]) {
      c.shape[last] *= l.shape[d];
      c.stride[0][last] = l.stride[0][d];
      c.stride[1][last] = l.stride[1][d];
      continue;
    }
    c.shape[c.rank] = l.shape[d];
    c.stride[0][c.rank] = l.stride[0][d];
    c.stride[1][c.rank] = l.stride[1][d];
    ++c.rank;
  }
  return c;
}

/// offset(l, k, i) with no division where l has one dimension (a contiguous or evenly strided
/// operand after collapsed()); rank 0 (a single element) is offset 0.
__device__ inline std::int64_t collapsed_offset(const Layout& l, int k, std::int64_t i) {
  return l.rank == 1 ? i * l.stride[k][0] : offset(l, k, i);
}

}  // namespace mixprec::kernels::cuda
