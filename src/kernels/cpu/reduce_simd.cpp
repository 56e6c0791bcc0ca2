// Reduction kernels over Highway, one source for every target (dispatcher: reduce.cpp).
// Rows (a contiguous range): four independent vector accumulators so the adds overlap, then
// the lanes folded in lane order: deterministic per target, a different summation order from
// the reference's. max/min/amax must equal the reference bit for bit, and the reference's
// sequential fold returns the FIRST NaN it meets (amax: with the sign cleared) and, on a tie of
// +0 and -0, the LAST of them; lanes see elements out of order, so a NaN or zero result is
// re-derived by a scalar scan in index order (rare: only rows whose result is NaN or 0).
// Columns (a strided range): each lane accumulates one column over k in index order, exactly
// the reference's order (max/min/amax bit-identical, sums too except norm2's fused x*x + acc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/reduce_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include <cmath>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/reduce_simd.h"
#include "kernels/spec/nan_minmax.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
template <ReduceOp OP>
constexpr bool kMaxLike = OP == ReduceOp::max || OP == ReduceOp::min || OP == ReduceOp::amax;

/// The identity the reference starts from (mean folds like sum).
template <ReduceOp OP>
constexpr float Identity() {
  if constexpr (OP == ReduceOp::max) return -HUGE_VALF;
  if constexpr (OP == ReduceOp::min) return HUGE_VALF;
  return 0.0f;
}

/// One element folded into the accumulator, as the reference's step does it (per lane).
template <ReduceOp OP, class D>
HWY_INLINE hn::Vec<D> Step(D d, hn::Vec<D> acc, hn::Vec<D> x) {
  (void)d;
  if constexpr (OP == ReduceOp::sum || OP == ReduceOp::mean) {
    return hn::Add(acc, x);
  } else if constexpr (OP == ReduceOp::norm1) {
    return hn::Add(acc, hn::Abs(x));
  } else if constexpr (OP == ReduceOp::norm2) {
    return hn::MulAdd(x, x, acc);
  } else {
    // nan_max / nan_min: a NaN accumulator stays, else a NaN x wins (the comparison is false),
    // else the larger (smaller), b on a tie.
    const hn::Vec<D> v = OP == ReduceOp::amax ? hn::Abs(x) : x;
    const auto keep = OP == ReduceOp::min ? hn::Lt(acc, v) : hn::Gt(acc, v);
    return hn::IfThenElse(hn::IsNaN(acc), acc, hn::IfThenElse(keep, acc, v));
  }
}

/// The scalar form of Step.
template <ReduceOp OP>
HWY_INLINE float StepScalar(float acc, float x) {
  if constexpr (OP == ReduceOp::sum || OP == ReduceOp::mean) return acc + x;
  if constexpr (OP == ReduceOp::norm1) return acc + std::fabs(x);
  if constexpr (OP == ReduceOp::norm2) return acc + x * x;
  if constexpr (OP == ReduceOp::max) return kernels::nan_max(acc, x);
  if constexpr (OP == ReduceOp::min) return kernels::nan_min(acc, x);
  return kernels::nan_max(acc, std::fabs(x));  // amax
}

/// Merges two accumulators (sum, or NaN-propagating max/min).
template <ReduceOp OP>
HWY_INLINE float CombineScalar(float a, float b) {
  if constexpr (!kMaxLike<OP>) return a + b;
  if constexpr (OP == ReduceOp::min) return kernels::nan_min(a, b);
  return kernels::nan_max(a, b);
}

template <ReduceOp OP, class D>
HWY_INLINE hn::Vec<D> Combine(D d, hn::Vec<D> a, hn::Vec<D> b) {
  if constexpr (!kMaxLike<OP>) return hn::Add(a, b);
  // b is already |x| for amax: fold it like max.
  return Step<OP == ReduceOp::amax ? ReduceOp::max : OP>(d, a, b);
}

/// The accumulator of OP over the n contiguous elements of a dtype-DT buffer.
template <ReduceOp OP, int DT>
float RowT(const void* p, std::size_t n) {
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  auto a0 = hn::Set(d, Identity<OP>());
  auto a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = Step<OP>(d, a0, LoadF32<DT>(d, p, i));
    a1 = Step<OP>(d, a1, LoadF32<DT>(d, p, i + N));
    a2 = Step<OP>(d, a2, LoadF32<DT>(d, p, i + 2 * N));
    a3 = Step<OP>(d, a3, LoadF32<DT>(d, p, i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = Step<OP>(d, a0, LoadF32<DT>(d, p, i));
  if (i < n) {
    // amax pads with 0 = |0|; the others with their identity.
    a1 = Step<OP>(d, a1, LoadF32N<DT>(d, p, i, n - i, Identity<OP>()));
  }
  const auto acc = Combine<OP>(d, Combine<OP>(d, a0, a1), Combine<OP>(d, a2, a3));
  const float r = FoldLanesInOrder(d, acc, [](float a, float b) { return CombineScalar<OP>(a, b); });
  if constexpr (kMaxLike<OP>) {
    if (r != r) {  // the first NaN in index order, as the reference returns it
      for (std::size_t k = 0; k < n; ++k) {
        const float x = LoadScalar<DT>(p, k);
        if (x != x) return OP == ReduceOp::amax ? std::fabs(x) : x;
      }
    } else if (r == 0.0f && OP != ReduceOp::amax) {  // amax's zeros are all +0
      // The maximum (minimum) is zero: the reference keeps the last zero it met.
      for (std::size_t k = n; k-- > 0;) {
        const float x = LoadScalar<DT>(p, k);
        if (x == 0.0f) return x;
      }
    }
  }
  return r;
}

/// acc[j - j0] = accumulator of OP over element k * inner + j for k in [k0, k1), j in [j0, j1):
/// four vectors of columns held in registers across the k loop, then single vectors, then the
/// leftover columns one by one; every column in k order. (Named accumulators, not an array: SVE
/// vectors are sizeless types, which C++ arrays cannot hold.)
template <ReduceOp OP, int DT>
HWY_INLINE void ColumnStrip4(const void* p, std::size_t k0, std::size_t k1, std::size_t inner,
                             std::size_t j, float* acc) {
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  auto a0 = hn::Set(d, Identity<OP>());
  auto a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t k = k0; k < k1; ++k) {
    const std::size_t base = k * inner + j;
    a0 = Step<OP>(d, a0, LoadF32<DT>(d, p, base));
    a1 = Step<OP>(d, a1, LoadF32<DT>(d, p, base + N));
    a2 = Step<OP>(d, a2, LoadF32<DT>(d, p, base + 2 * N));
    a3 = Step<OP>(d, a3, LoadF32<DT>(d, p, base + 3 * N));
  }
  hn::StoreU(a0, d, acc);
  hn::StoreU(a1, d, acc + N);
  hn::StoreU(a2, d, acc + 2 * N);
  hn::StoreU(a3, d, acc + 3 * N);
}

template <ReduceOp OP, int DT>
HWY_INLINE void ColumnStrip1(const void* p, std::size_t k0, std::size_t k1, std::size_t inner,
                             std::size_t j, float* acc) {
  const hn::ScalableTag<float> d;
  auto a = hn::Set(d, Identity<OP>());
  for (std::size_t k = k0; k < k1; ++k) a = Step<OP>(d, a, LoadF32<DT>(d, p, k * inner + j));
  hn::StoreU(a, d, acc);
}

template <ReduceOp OP, int DT>
void ColumnsT(const void* p, std::size_t k0, std::size_t k1, std::size_t inner, std::size_t j0,
              std::size_t j1, float* acc) {
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  std::size_t j = j0;
  for (; j + 4 * N <= j1; j += 4 * N) ColumnStrip4<OP, DT>(p, k0, k1, inner, j, acc + (j - j0));
  for (; j + N <= j1; j += N) ColumnStrip1<OP, DT>(p, k0, k1, inner, j, acc + (j - j0));
  for (; j < j1; ++j) {
    float a = Identity<OP>();
    for (std::size_t k = k0; k < k1; ++k) a = StepScalar<OP>(a, LoadScalar<DT>(p, k * inner + j));
    acc[j - j0] = a;
  }
}

/// Calls f(op constant) for a run-time op.
template <class F>
HWY_INLINE void WithOp(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return f(std::integral_constant<ReduceOp, ReduceOp::sum>{});
    case ReduceOp::max: return f(std::integral_constant<ReduceOp, ReduceOp::max>{});
    case ReduceOp::min: return f(std::integral_constant<ReduceOp, ReduceOp::min>{});
    case ReduceOp::amax: return f(std::integral_constant<ReduceOp, ReduceOp::amax>{});
    case ReduceOp::norm1: return f(std::integral_constant<ReduceOp, ReduceOp::norm1>{});
    case ReduceOp::norm2: return f(std::integral_constant<ReduceOp, ReduceOp::norm2>{});
  }
}

float ReduceRow(ReduceOp op, int dtype, const void* p, std::int64_t n) {
  float r = 0.0f;
  WithOp(op, [&](auto o) {
    WithDType(dtype, [&](auto t) {
      r = RowT<decltype(o)::value, decltype(t)::value>(p, static_cast<std::size_t>(n));
    });
  });
  return r;
}

void ReduceColumns(ReduceOp op, int dtype, const void* p, std::int64_t k0, std::int64_t k1,
                   std::int64_t inner, std::int64_t j0, std::int64_t j1, float* acc) {
  WithOp(op, [&](auto o) {
    WithDType(dtype, [&](auto t) {
      ColumnsT<decltype(o)::value, decltype(t)::value>(
          p, static_cast<std::size_t>(k0), static_cast<std::size_t>(k1),
          static_cast<std::size_t>(inner), static_cast<std::size_t>(j0),
          static_cast<std::size_t>(j1), acc);
    });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(ReduceRow);
HWY_EXPORT(ReduceColumns);

float simd_reduce_row(ReduceOp op, DType dtype, const void* in, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(ReduceRow)(op, static_cast<int>(dtype), in, n);
}

void simd_reduce_columns(ReduceOp op, DType dtype, const void* in, std::int64_t k0,
                         std::int64_t k1, std::int64_t inner, std::int64_t j0, std::int64_t j1,
                         float* acc) {
  HWY_DYNAMIC_DISPATCH(ReduceColumns)(op, static_cast<int>(dtype), in, k0, k1, inner, j0, j1,
                                      acc);
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
