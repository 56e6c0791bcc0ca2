#pragma once
// Multi-tensor launches (the optimizer updates, the gradient unscale): one grid over many
// tensors, each block working on one chunk of one tensor. The plan travels with the tensors'
// descriptors in the kernel's parameter space (PyTorch's multi_tensor_apply passes its tensor
// lists the same way), so a launch needs no upload of a table. Included by .cu files only.
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cuda {

/// Blocks [first_block[r], first_block[r + 1]) cover run r's elements in chunks of a fixed size;
/// a block never spans two runs, so its run's dtypes and scalars are uniform across its warps.
template <int kMaxRuns>
struct BlockPlan {
  int first_block[kMaxRuns + 1];
  int runs;

  /// Plans `runs` runs of count_of(r) elements, `per_block` elements a block; returns the
  /// grid's size (0: nothing to do). BackendError if it exceeds a grid.
  template <class CountOf>
  std::int64_t plan(int run_count, const CountOf& count_of, std::int64_t per_block,
                    const char* kernel) {
    runs = run_count;
    std::int64_t blocks = 0;
    for (int r = 0; r < run_count; ++r) {
      first_block[r] = static_cast<int>(blocks);
      blocks += (static_cast<std::int64_t>(count_of(r)) + per_block - 1) / per_block;
      MIXPREC_CHECK(blocks < (std::int64_t{1} << 31), BackendError, kernel,
                    "a multi-tensor launch of " << blocks << " blocks exceeds the grid; split it");
    }
    first_block[run_count] = static_cast<int>(blocks);
    return blocks;
  }

  /// The run block `b` works on: the last run whose first block is <= b (a linear scan over at
  /// most kMaxRuns entries of uniform, cached parameter memory; empty runs own no block).
  __device__ int run_of(int b) const {
    int r = 0;
    while (r + 1 < runs && first_block[r + 1] <= b) ++r;
    return r;
  }
};

}  // namespace mixprec::kernels::cuda
