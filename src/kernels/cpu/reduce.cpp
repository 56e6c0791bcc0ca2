// Dispatching reductions; the vector kernels are in reduce_simd.cpp (Highway, every target).
// inner == 1 (the last axis, or the whole tensor): each row is cut into fixed 64K-element
// chunks whose partial accumulators are combined in chunk order, so one long row (the
// whole-tensor gradient norm of clip_grad_norm) runs on every thread and the result does not
// depend on the thread count. inner > 1 (e.g. a bias gradient summed over the batch): the
// column tiles of column_tiles.h (up to 256 columns by 64K/width rows, the partials of a column
// combined in k order).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/column_tiles.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/reduce_simd.h"
#include "kernels/cpu/run_pieces.h"
#include "kernels/reduce.h"
#include "kernels/spec/nan_minmax.h"

namespace mixprec::kernels {
namespace {

constexpr std::int64_t kRowChunk = 65536;   // elements per partial result of a long row

bool is_max_like(ReduceOp op) {
  return op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::amax;
}

/// Merges the partial accumulators of two consecutive chunks, a before b: NaN-propagating for
/// max/min/amax with the reference's choices (a NaN a, then a NaN b, b on a tie), so chunking
/// gives the reference's bits.
float combine(ReduceOp op, float a, float b) {
  if (!is_max_like(op)) return a + b;
  return op == ReduceOp::min ? kernels::nan_min(a, b) : kernels::nan_max(a, b);
}

/// The reference's finishing step: mean divides by n, norm2 takes the square root.
float finish(ReduceOp op, float acc, std::int64_t n) {
  if (op == ReduceOp::mean) return acc / static_cast<float>(n);
  if (op == ReduceOp::norm2) return std::sqrt(acc);
  return acc;
}

void store(void* out, DType dtype, std::int64_t i, float v) {
  dispatch(dtype, [&](auto t) {
    using T = decltype(t);
    static_cast<T*>(out)[i] = T(v);
  });
}

}  // namespace

const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::amax: return "amax";
    case ReduceOp::norm1: return "norm1";
    case ReduceOp::norm2: return "norm2";
  }
  return "?";
}

namespace cpu {
void reduce(ReduceOp op, const void* in, DType in_dtype, std::int64_t outer, std::int64_t n,
            std::int64_t inner, void* out, DType out_dtype) {
  detail::check_reduce_args(op, outer, n, inner);
  const std::string label = dtype_label(in_dtype, out_dtype);
  require_compute_dtype(name(op), in_dtype);  // fp8 calls run the reference
  require_compute_dtype(name(op), out_dtype);
  log_simd(name(op), label);
  const bool parallel = outer * n * inner >= kParallelMinWork;

  if (inner == 1) {
    const std::int64_t chunks = std::max<std::int64_t>(1, (n + kRowChunk - 1) / kRowChunk);
    if (chunks == 1) {
      parallel_for(outer, parallel, [&](std::int64_t o) {
        const float acc = simd_reduce_row(op, in_dtype, at(in, in_dtype, o * n), n);
        store(out, out_dtype, o, finish(op, acc, n));
      });
      return;
    }
    std::vector<float> partial(static_cast<std::size_t>(outer * chunks));
    parallel_for(outer * chunks, true, [&](std::int64_t t) {
      const std::int64_t o = t / chunks, begin = (t % chunks) * kRowChunk;
      partial[t] = simd_reduce_row(op, in_dtype, at(in, in_dtype, o * n + begin),
                                   std::min(kRowChunk, n - begin));
    });
    for (std::int64_t o = 0; o < outer; ++o) {
      float acc = partial[o * chunks];
      for (std::int64_t c = 1; c < chunks; ++c) acc = combine(op, acc, partial[o * chunks + c]);
      store(out, out_dtype, o, finish(op, acc, n));
    }
    return;
  }

  for_column_tiles(
      outer, n, inner, parallel,
      [&](std::int64_t o, std::int64_t k0, std::int64_t k1, std::int64_t j0, std::int64_t j1,
          float* acc) {
        simd_reduce_columns(op, in_dtype, at(in, in_dtype, o * n * inner), k0, k1, inner, j0, j1,
                            acc);
      },
      [op](float a, float b) { return combine(op, a, b); },
      [&](std::int64_t o, std::int64_t j, float total) {
        store(out, out_dtype, o * inner + j, finish(op, total, n));
      });
}
// Every run cut into the 64K-element chunks reduce() cuts a row into, all chunks of all runs
// over the threads together, then each run's partials combined in chunk order and finished:
// each value has the bits reduce() gives that run alone.
void reduce_batch(const ReduceBatch& batch) {
  MIXPREC_ASSERT(batch.size >= 0 && batch.size <= kReduceBatchRuns);
  for (int r = 0; r < batch.size; ++r) {
    const ReduceRun& run = batch.runs[r];
    detail::check_reduce_args(batch.op, 1, run.count, 1);
    require_compute_dtype(name(batch.op), run.dtype);
    log_simd(name(batch.op), dtype_label(run.dtype, DType::f32));
  }
  std::size_t total = 0;
  const std::vector<RunPiece> pieces = cut_into_pieces(
      batch.size, [&](int r) { return batch.runs[r].count; }, static_cast<std::size_t>(kRowChunk),
      &total);
  std::vector<float> partial(pieces.size());
  parallel_for(static_cast<std::int64_t>(pieces.size()),
               total >= static_cast<std::size_t>(kParallelMinWork), [&](std::int64_t k) {
                 const RunPiece& p = pieces[static_cast<std::size_t>(k)];
                 const ReduceRun& run = batch.runs[p.run];
                 partial[static_cast<std::size_t>(k)] = simd_reduce_row(
                     batch.op, run.dtype, at(run.data, run.dtype, static_cast<std::int64_t>(p.begin)),
                     static_cast<std::int64_t>(p.count));
               });
  std::size_t k = 0;
  for (int r = 0; r < batch.size; ++r) {
    const ReduceRun& run = batch.runs[r];
    // An empty run has no piece: its value is the empty row's, as reduce() computes it.
    float acc = run.count == 0 ? simd_reduce_row(batch.op, run.dtype, run.data, 0) : partial[k++];
    while (k < pieces.size() && pieces[k].run == r) acc = combine(batch.op, acc, partial[k++]);
    batch.out[r] = finish(batch.op, acc, run.count);
  }
}

}  // namespace cpu

}  // namespace mixprec::kernels
