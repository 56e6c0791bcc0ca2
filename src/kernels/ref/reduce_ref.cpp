// Reference reductions: one f32 accumulator per output, elements added in index order.
// max/min/amax propagate NaN (a NaN anywhere gives NaN, like torch.amax).
#include <cmath>

#include "kernels/reduce.h"
#include "kernels/spec/nan_minmax.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

void detail::check_reduce_args(ReduceOp op, std::int64_t outer, std::int64_t n,
                               std::int64_t inner) {
  MIXPREC_CHECK(outer >= 0 && n >= 0 && inner >= 0, ShapeError, name(op),
                "negative extent (outer " << outer << ", n " << n << ", inner " << inner << ")");
  MIXPREC_CHECK(n >= 1 || (op != ReduceOp::max && op != ReduceOp::min && op != ReduceOp::amax),
                ValueError, name(op), "cannot reduce an empty axis (it has no identity)");
}

namespace ref {
namespace {

/// Calls fn(init, step, finish): acc = init; acc = step(acc, x) for each x; out = finish(acc).
template <class Fn>
void with_reduce(ReduceOp op, std::int64_t n, Fn&& fn) {
  const auto ident = [](float acc) { return acc; };
  switch (op) {
    case ReduceOp::sum:
      return fn(0.0f, [](float acc, float x) { return acc + x; }, ident);
    case ReduceOp::mean: {
      const float count = static_cast<float>(n);
      return fn(0.0f, [](float acc, float x) { return acc + x; },
                [count](float acc) { return acc / count; });
    }
    case ReduceOp::max:
      return fn(-INFINITY, [](float acc, float x) { return nan_max(acc, x); }, ident);
    case ReduceOp::min:
      return fn(INFINITY, [](float acc, float x) { return nan_min(acc, x); }, ident);
    case ReduceOp::amax:
      return fn(0.0f, [](float acc, float x) { return nan_max(acc, std::fabs(x)); }, ident);
    case ReduceOp::norm1:
      return fn(0.0f, [](float acc, float x) { return acc + std::fabs(x); }, ident);
    case ReduceOp::norm2:
      return fn(0.0f, [](float acc, float x) { return acc + x * x; },
                [](float acc) { return std::sqrt(acc); });
  }
  MIXPREC_ASSERT(false);
}

}  // namespace

void reduce(ReduceOp op, const void* in, DType in_dtype, std::int64_t outer, std::int64_t n,
            std::int64_t inner, void* out, DType out_dtype) {
  detail::check_reduce_args(op, outer, n, inner);
  dispatch(in_dtype, out_dtype, [&](auto ti, auto to) {
    using TI = decltype(ti);
    using TO = decltype(to);
    const TI* src = static_cast<const TI*>(in);
    TO* dst = static_cast<TO*>(out);
    with_reduce(op, n, [&](float init, auto step, auto finish) {
      for (std::int64_t o = 0; o < outer; ++o) {
        for (std::int64_t i = 0; i < inner; ++i) {
          float acc = init;
          for (std::int64_t k = 0; k < n; ++k) {
            acc = step(acc, static_cast<float>(src[(o * n + k) * inner + i]));
          }
          dst[o * inner + i] = TO(finish(acc));
        }
      }
    });
  });
}

void reduce_batch(const ReduceBatch& batch) {
  for (int r = 0; r < batch.size; ++r) {
    const ReduceRun& run = batch.runs[r];
    reduce(batch.op, run.data, run.dtype, 1, run.count, 1, batch.out + r, DType::f32);
  }
}

}  // namespace ref
}  // namespace mixprec::kernels
