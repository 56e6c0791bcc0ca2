// Dispatching reductions. inner == 1 (the last axis, or the whole tensor): each row is cut into
// fixed 64K-element chunks whose partial results are combined in chunk order, so one long row
// still uses every thread and the result does not depend on the thread count. inner > 1 (e.g.
// a bias gradient summed over the batch): 16 columns per vector, tasks over column blocks.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/reduce_avx512.h"
#include "kernels/reduce.h"

namespace mixprec::kernels {
namespace {

using avx512::VReduce;

static_assert(static_cast<int>(ReduceOp::sum) == static_cast<int>(VReduce::sum) &&
              static_cast<int>(ReduceOp::amax) == static_cast<int>(VReduce::amax) &&
              static_cast<int>(ReduceOp::norm2) == static_cast<int>(VReduce::norm2));

constexpr std::int64_t kRowChunk = 65536;   // elements per partial result of a long row
constexpr std::int64_t kColumnBlock = 256;  // columns per task in the column case

bool is_max_like(ReduceOp op) {
  return op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::amax;
}

/// Merges two partial accumulators (NaN-propagating for max/min/amax, like the reference).
float combine(ReduceOp op, float a, float b) {
  if (!is_max_like(op)) return a + b;
  if (a != a) return a;
  if (b != b) return b;
  if (op == ReduceOp::min) return a < b ? a : b;
  return a > b ? a : b;
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
  MIXPREC_CHECK(outer >= 0 && n >= 0 && inner >= 0, ShapeError, name(op),
                "negative extent (outer " << outer << ", n " << n << ", inner " << inner << ")");
  MIXPREC_CHECK(n >= 1 || !is_max_like(op), ValueError, name(op),
                "cannot reduce an empty axis (it has no identity)");
  require_compute_dtype(name(op), in_dtype);  // the vector kernels know dtype codes 0-2 only
  require_compute_dtype(name(op), out_dtype);
  const std::string why_not = cpu::avx512_unavailable_reason();
  cpu::log_impl(name(op), cpu::dtype_label(in_dtype, out_dtype), why_not.empty(), why_not);
  if (!why_not.empty()) return ref::reduce(op, in, in_dtype, outer, n, inner, out, out_dtype);
  const VReduce vop = static_cast<VReduce>(op);
  const int dt = static_cast<int>(in_dtype);
  const bool parallel = outer * n * inner >= cpu::kParallelMinWork;

  if (inner == 1) {
    const std::int64_t chunks = n <= kRowChunk ? 1 : (n + kRowChunk - 1) / kRowChunk;
    if (chunks == 1) {
      cpu::parallel_for(outer, parallel, [&](std::int64_t o) {
        const float acc = avx512::reduce_contiguous(vop, cpu::at(in, in_dtype, o * n), dt, n);
        store(out, out_dtype, o, finish(op, acc, n));
      });
      return;
    }
    std::vector<float> partial(static_cast<std::size_t>(outer * chunks));
    cpu::parallel_for(outer * chunks, true, [&](std::int64_t t) {
      const std::int64_t o = t / chunks, begin = (t % chunks) * kRowChunk;
      partial[t] = avx512::reduce_contiguous(vop, cpu::at(in, in_dtype, o * n + begin), dt,
                                             std::min(kRowChunk, n - begin));
    });
    for (std::int64_t o = 0; o < outer; ++o) {
      float acc = partial[o * chunks];
      for (std::int64_t c = 1; c < chunks; ++c) acc = combine(op, acc, partial[o * chunks + c]);
      store(out, out_dtype, o, finish(op, acc, n));
    }
    return;
  }

  const std::int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  cpu::parallel_for(outer * blocks, parallel, [&](std::int64_t t) {
    const std::int64_t o = t / blocks, j0 = (t % blocks) * kColumnBlock;
    const std::int64_t j1 = std::min(inner, j0 + kColumnBlock);
    float acc[kColumnBlock];
    avx512::reduce_columns(vop, cpu::at(in, in_dtype, o * n * inner), dt, n, inner, j0, j1, acc);
    for (std::int64_t j = j0; j < j1; ++j) {
      store(out, out_dtype, o * inner + j, finish(op, acc[j - j0], n));
    }
  });
}
}  // namespace cpu

}  // namespace mixprec::kernels
