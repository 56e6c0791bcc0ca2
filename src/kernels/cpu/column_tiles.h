#pragma once
/// How the cpu backend sums the columns of row-major [rows, cols] slabs: reduce over a middle
/// axis (a bias gradient summed over the batch) and the bias gradient that
/// matmul_post_op_backward sums as it writes C. Written once so both give the same bits:
/// tiles of up to kColumnBlock columns by kRowChunk / min(cols, kColumnBlock) rows, each tile
/// summing its columns in row order, a column's tile results combined in row-chunk order. The
/// tiling depends on the shape alone, never on the thread count.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/parallel_chunks.h"

namespace mixprec::kernels::cpu {

inline constexpr std::int64_t kColumnSumRowChunk = 65536;  ///< elements per tile, about
inline constexpr std::int64_t kColumnBlock = 256;          ///< columns per tile at most

/// Runs tile(o, k0, k1, j0, j1, acc) for every tile of `outer` slabs of [rows, cols] (in
/// parallel when asked), where tile writes acc[j - j0], j in [j0, j1), the accumulator of
/// column j over rows [k0, k1) of slab o; then finish(o, j, total) once per column, total the
/// tiles' accumulators of the column folded by combine(a, b) in row-chunk order.
template <class Tile, class Combine, class Finish>
void for_column_tiles(std::int64_t outer, std::int64_t rows, std::int64_t cols, bool parallel,
                      const Tile& tile, const Combine& combine, const Finish& finish) {
  if (outer == 0 || cols == 0) return;
  const std::int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  const std::int64_t krows =
      std::max<std::int64_t>(1, kColumnSumRowChunk / std::min(cols, kColumnBlock));
  const std::int64_t kchunks = std::max<std::int64_t>(1, (rows + krows - 1) / krows);
  // One row chunk: accumulate straight into a task-local array; several: into partial[o][c][j].
  std::vector<float> partial(kchunks > 1 ? static_cast<std::size_t>(outer * kchunks * cols) : 0);
  parallel_for(outer * blocks * kchunks, parallel, [&](std::int64_t t) {
    const std::int64_t o = t / (blocks * kchunks), b = (t / kchunks) % blocks, c = t % kchunks;
    const std::int64_t j0 = b * kColumnBlock, j1 = std::min(cols, j0 + kColumnBlock);
    const std::int64_t k0 = c * krows, k1 = std::min(rows, k0 + krows);
    if (kchunks > 1) {
      tile(o, k0, k1, j0, j1, partial.data() + (o * kchunks + c) * cols + j0);
      return;
    }
    float acc[kColumnBlock];
    tile(o, k0, k1, j0, j1, acc);
    for (std::int64_t j = j0; j < j1; ++j) finish(o, j, acc[j - j0]);
  });
  if (kchunks == 1) return;
  parallel_for(outer * blocks, parallel, [&](std::int64_t t) {
    const std::int64_t o = t / blocks, j0 = (t % blocks) * kColumnBlock;
    const std::int64_t j1 = std::min(cols, j0 + kColumnBlock);
    const float* p = partial.data() + o * kchunks * cols;
    for (std::int64_t j = j0; j < j1; ++j) {
      float acc = p[j];
      for (std::int64_t c = 1; c < kchunks; ++c) acc = combine(acc, p[c * cols + j]);
      finish(o, j, acc);
    }
  });
}

}  // namespace mixprec::kernels::cpu
