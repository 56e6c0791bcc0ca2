// Dispatching embedding kernels (the cpu backend): index checks, threads and the verbose log;
// the row work is the Highway code of embedding_simd.cpp.
//
// The backward never scatters from several threads into one row. The indices are grouped by
// destination row first (a counting sort that keeps each row's indices in increasing order),
// then each destination row is summed by one task, in that order: the additions per element are
// the reference's, in the reference's order, so the result is bit-identical to it and cannot
// depend on the thread count. Tasks are fixed groups of rows.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/embedding_simd.h"
#include "kernels/embedding.h"

namespace mixprec::kernels::cpu {
namespace {

/// Elements per parallel task (rows are grouped up to about this many).
constexpr std::int64_t kChunk = 16384;

/// Calls body(r0, r1) over [0, count) rows in fixed groups of about kChunk elements, in parallel
/// when the work reaches kParallelMinWork elements.
template <class Body>
void for_row_groups(std::int64_t count, std::int64_t cols, std::int64_t work, Body&& body) {
  const std::int64_t per = std::max<std::int64_t>(1, kChunk / std::max<std::int64_t>(cols, 1));
  const std::int64_t groups = (count + per - 1) / per;
  parallel_for(groups, work >= kParallelMinWork, [&](std::int64_t g) {
    body(g * per, std::min(count, (g + 1) * per));
  });
}

}  // namespace

void embedding(const void* weight, DType dtype, std::int64_t rows, std::int64_t cols,
               const std::int64_t* indices, std::int64_t n, void* out) {
  detail::check_embedding_args("embedding", rows, cols, indices, n, -1);
  log_simd("embedding", name(dtype));
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * size_of(dtype);
  const auto* src = static_cast<const unsigned char*>(weight);
  auto* dst = static_cast<unsigned char*>(out);
  for_row_groups(n, cols, n * cols, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      embedding_copy_row(src + static_cast<std::size_t>(indices[i]) * row_bytes,
                         dst + static_cast<std::size_t>(i) * row_bytes, row_bytes);
    }
  });
}

void embedding_backward(const void* dy, DType dy_dtype, const std::int64_t* indices,
                        std::int64_t n, std::int64_t rows, std::int64_t cols,
                        std::int64_t padding_idx, void* dweight, DType dweight_dtype) {
  detail::check_embedding_args("embedding_backward", rows, cols, indices, n, padding_idx);
  const std::string label = dtype_label(dy_dtype, dweight_dtype);
  require_compute_dtype("embedding_backward", dy_dtype);  // fp8 calls run the reference
  require_compute_dtype("embedding_backward", dweight_dtype);
  log_simd("embedding_backward", label);
  // Counting sort by destination row: start[r]..start[r+1] lists row r's positions i, in
  // increasing order (padding rows get none).
  std::vector<std::int64_t> start(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    if (indices[i] != padding_idx) ++start[static_cast<std::size_t>(indices[i]) + 1];
  }
  for (std::int64_t r = 0; r < rows; ++r) start[r + 1] += start[r];
  std::vector<std::int64_t> order(static_cast<std::size_t>(start[rows]));
  {
    std::vector<std::int64_t> next(start.begin(), start.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) {
      if (indices[i] != padding_idx) order[static_cast<std::size_t>(next[indices[i]]++)] = i;
    }
  }
  const bool f32_out = dweight_dtype == DType::f32;
  for_row_groups(rows, cols, (n + rows) * cols, [&](std::int64_t r0, std::int64_t r1) {
    // 16-bit gradients accumulate in an f32 row first and are rounded once.
    std::vector<float> scratch(f32_out ? 0 : static_cast<std::size_t>(cols));
    for (std::int64_t r = r0; r < r1; ++r) {
      float* acc = f32_out ? static_cast<float*>(dweight) + r * cols : scratch.data();
      std::fill(acc, acc + cols, 0.0f);
      for (std::int64_t k = start[r]; k < start[r + 1]; ++k) {
        embedding_accumulate_row(acc, at(dy, dy_dtype, order[k] * cols), dy_dtype, cols);
      }
      if (!f32_out) embedding_store_row(acc, at(dweight, dweight_dtype, r * cols), dweight_dtype, cols);
    }
  });
}

}  // namespace mixprec::kernels::cpu
