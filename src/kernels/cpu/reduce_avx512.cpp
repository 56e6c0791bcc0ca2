// AVX-512 reductions. Rows: four 16-lane accumulators (so adds overlap), combined in a fixed
// order, then the 16 lanes in lane order: deterministic, but a different summation order from
// the reference's. Columns: 16 columns per vector, each lane accumulating over k in index order,
// which is exactly the reference's order (bit-identical except norm2, which uses an FMA).
#include "kernels/cpu/reduce_avx512.h"

#include <cstdint>

#include "kernels/cpu/vecmath_avx512.h"

namespace mixprec::kernels::avx512 {
namespace {

inline float scalar_nan_max(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
inline float scalar_nan_min(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

// Each op: ident() the identity, step(acc, x) folds one element, combine(a, b) merges two
// accumulators (vector and scalar forms).
struct SumOp {
  static __m512 ident() { return _mm512_setzero_ps(); }
  static __m512 step(__m512 acc, __m512 x) { return _mm512_add_ps(acc, x); }
  static __m512 combine(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static float combine(float a, float b) { return a + b; }
};
struct AbsSumOp : SumOp {
  static __m512 step(__m512 acc, __m512 x) { return _mm512_add_ps(acc, abs_ps(x)); }
};
struct SquareSumOp : SumOp {
  static __m512 step(__m512 acc, __m512 x) { return _mm512_fmadd_ps(x, x, acc); }
};
struct MaxOp {
  static __m512 ident() { return _mm512_set1_ps(-__builtin_inff()); }
  static __m512 step(__m512 acc, __m512 x) { return nan_max(acc, x); }
  static __m512 combine(__m512 a, __m512 b) { return nan_max(a, b); }
  static float combine(float a, float b) { return scalar_nan_max(a, b); }
};
struct MinOp {
  static __m512 ident() { return _mm512_set1_ps(__builtin_inff()); }
  static __m512 step(__m512 acc, __m512 x) { return nan_min(acc, x); }
  static __m512 combine(__m512 a, __m512 b) { return nan_min(a, b); }
  static float combine(float a, float b) { return scalar_nan_min(a, b); }
};
struct AbsMaxOp : MaxOp {
  static __m512 ident() { return _mm512_setzero_ps(); }
  static __m512 step(__m512 acc, __m512 x) { return nan_max(acc, abs_ps(x)); }
};

template <class Op>
float horizontal(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  float r = lane[0];
  for (int j = 1; j < 16; ++j) r = Op::combine(r, lane[j]);
  return r;
}

template <int DT, class Op>
float contiguous(const void* in, std::int64_t n) {
  __m512 a0 = Op::ident(), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = Op::step(a0, load<DT>(in, i));
    a1 = Op::step(a1, load<DT>(in, i + 16));
    a2 = Op::step(a2, load<DT>(in, i + 32));
    a3 = Op::step(a3, load<DT>(in, i + 48));
  }
  for (; i + 16 <= n; i += 16) a0 = Op::step(a0, load<DT>(in, i));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    a1 = Op::step(a1, _mm512_mask_mov_ps(Op::ident(), m, load<DT>(in, i, m)));
  }
  return horizontal<Op>(Op::combine(Op::combine(a0, a1), Op::combine(a2, a3)));
}

/// Columns [j, j + 16 NV) (the last vector masked by mlast) over k < n.
template <int DT, class Op, int NV>
void column_strip(const void* in, std::int64_t n, std::int64_t inner, std::int64_t j,
                  __mmask16 mlast, float* acc) {
  __m512 a[NV];
  for (int v = 0; v < NV; ++v) a[v] = Op::ident();
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t base = k * inner + j;
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? mlast : static_cast<__mmask16>(0xffff);
      a[v] = Op::step(a[v], _mm512_mask_mov_ps(Op::ident(), m, load<DT>(in, base + 16 * v, m)));
    }
  }
  for (int v = 0; v < NV; ++v) {
    _mm512_mask_storeu_ps(acc + 16 * v, v == NV - 1 ? mlast : static_cast<__mmask16>(0xffff),
                          a[v]);
  }
}

template <int DT, class Op>
void columns(const void* in, std::int64_t n, std::int64_t inner, std::int64_t j0,
             std::int64_t j1, float* acc) {
  constexpr int kBlock = 8;  // 8 vectors = 128 columns in registers per pass over k
  std::int64_t j = j0;
  for (; j + 16 * kBlock <= j1; j += 16 * kBlock) {
    column_strip<DT, Op, kBlock>(in, n, inner, j, 0xffff, acc + (j - j0));
  }
  for (; j < j1; j += 16) {
    column_strip<DT, Op, 1>(in, n, inner, j, tail_mask(j1 - j), acc + (j - j0));
  }
}

/// Calls body(IntTag<dtype>, op struct).
template <class Body>
void with_op(VReduce op, int dtype, Body&& body) {
  auto by_dtype = [&](auto opv) { with_dtype(dtype, [&](auto t) { body(t, opv); }); };
  switch (op) {
    case VReduce::sum: case VReduce::mean: return by_dtype(SumOp{});
    case VReduce::max: return by_dtype(MaxOp{});
    case VReduce::min: return by_dtype(MinOp{});
    case VReduce::amax: return by_dtype(AbsMaxOp{});
    case VReduce::norm1: return by_dtype(AbsSumOp{});
    case VReduce::norm2: return by_dtype(SquareSumOp{});
  }
}

}  // namespace

float reduce_contiguous(VReduce op, const void* in, int dtype, std::int64_t n) {
  float r = 0.0f;
  with_op(op, dtype, [&](auto t, auto o) {
    r = contiguous<decltype(t)::value, decltype(o)>(in, n);
  });
  return r;
}

void reduce_columns(VReduce op, const void* in, int dtype, std::int64_t n, std::int64_t inner,
                    std::int64_t j0, std::int64_t j1, float* acc) {
  with_op(op, dtype, [&](auto t, auto o) {
    columns<decltype(t)::value, decltype(o)>(in, n, inner, j0, j1, acc);
  });
}

}  // namespace mixprec::kernels::avx512
