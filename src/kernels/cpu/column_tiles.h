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

/// The row chunks of a [rows, cols] slab: krows rows each (the last one fewer), kchunks of them.
struct ColumnRowChunks {
  std::int64_t krows, kchunks;
};
inline ColumnRowChunks column_row_chunks(std::int64_t rows, std::int64_t cols) {
  const std::int64_t krows =
      std::max<std::int64_t>(1, kColumnSumRowChunk / std::max<std::int64_t>(1, std::min(cols, kColumnBlock)));
  return {krows, std::max<std::int64_t>(1, (rows + krows - 1) / krows)};
}

/// Runs tile(o, k0, k1, j0, j1, acc) for every tile of `outer` slabs of [rows, cols] (in
/// parallel when asked), where tile writes acc[j - j0], j in [j0, j1), the accumulator of
/// column j over rows [k0, k1) of slab o; then finish(o, j, total) once per column, total the
/// tiles' accumulators of the column folded by combine(a, b) in row-chunk order. A task covers
/// task_cols columns (kColumnBlock, or more: whole rows stream better through a pass that
/// reads the rows anyway); the row chunks, and so the bits, do not depend on it.
template <class Tile, class Combine, class Finish>
void for_column_tiles(std::int64_t outer, std::int64_t rows, std::int64_t cols, bool parallel,
                      const Tile& tile, const Combine& combine, const Finish& finish,
                      std::int64_t task_cols = kColumnBlock) {
  if (outer == 0 || cols == 0) return;
  // Named variables, not a structured binding: the lambdas below capture them (clang before
  // 16, which builds the fuzz targets, rejects captured bindings).
  const ColumnRowChunks chunks = column_row_chunks(rows, cols);
  const std::int64_t krows = chunks.krows, kchunks = chunks.kchunks;
  const std::int64_t width = std::max<std::int64_t>(1, task_cols);
  const std::int64_t blocks = (cols + width - 1) / width;
  // One row chunk of at most kColumnBlock columns: accumulate straight into a task-local array;
  // else into partial[o][c][j].
  const bool local = kchunks == 1 && width <= kColumnBlock;
  std::vector<float> partial(local ? 0 : static_cast<std::size_t>(outer * kchunks * cols));
  parallel_for(outer * blocks * kchunks, parallel, [&](std::int64_t t) {
    const std::int64_t o = t / (blocks * kchunks), b = (t / kchunks) % blocks, c = t % kchunks;
    const std::int64_t j0 = b * width, j1 = std::min(cols, j0 + width);
    const std::int64_t k0 = c * krows, k1 = std::min(rows, k0 + krows);
    if (!local) {
      tile(o, k0, k1, j0, j1, partial.data() + (o * kchunks + c) * cols + j0);
      return;
    }
    float acc[kColumnBlock];
    tile(o, k0, k1, j0, j1, acc);
    for (std::int64_t j = j0; j < j1; ++j) finish(o, j, acc[j - j0]);
  });
  if (local) return;
  const std::int64_t finish_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  parallel_for(outer * finish_blocks, parallel, [&](std::int64_t t) {
    const std::int64_t o = t / finish_blocks, j0 = (t % finish_blocks) * kColumnBlock;
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
