// The vector building blocks of the blocked attention kernel over Highway, one source for every
// target (dispatcher: attention.cpp). Everything works on f32 scratch rows; 16-bit q, k, v and
// dout are widened once per block through convert-inl.h. Dot products and row sums fold their
// lanes in lane order, so each target is deterministic.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include <cmath>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/cpu/attention_simd.h"
#include "kernels/cpu/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
/// e^(x - sub) for x - sub <= 0 or -inf: Highway's Exp is specified on [-FLT_MAX, 104], so the
/// argument is clamped below at -1000 (e^-1000 is 0 in f32); NaN passes through as std::exp's.
HWY_INLINE VF ExpNonPositive(DF d, VF x) {
  const VF e = hn::Exp(d, hn::Max(x, hn::Set(d, -1000.0f)));
  return hn::IfThenElse(hn::IsNaN(x), x, e);
}

HWY_INLINE float DotF32(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                        std::size_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  VF s0 = hn::Zero(d), s1 = s0;
  std::size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N), s1);
  }
  for (; i + N <= n; i += N) s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
  float s = SumLanesInOrder(d, hn::Add(s0, s1));
  for (; i < n; ++i) s += a[i] * b[i];  // only on targets wider than the 16-float padding
  return s;
}

template <int DT>
void WidenT(const void* src, std::size_t n, float* dst) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(LoadF32<DT>(d, src, i), d, dst + i);
  if (i < n) StoreF32N<kF32>(d, LoadF32N<DT>(d, src, i, n - i), dst, i, n - i);
}

template <int DT>
void NarrowScaledT(const float* src, std::size_t n, float s, void* dst) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, s);
  std::size_t i = 0;
  for (; i + N <= n; i += N) StoreF32<DT>(d, hn::Mul(hn::LoadU(d, src + i), vs), dst, i);
  if (i < n) {
    StoreF32N<DT>(d, hn::Mul(LoadF32N<kF32>(d, src, i, n - i), vs), dst, i, n - i);
  }
}

template <int DT>
float TypedDotT(const void* a, const void* b, std::size_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  VF s = hn::Zero(d);
  std::size_t i = 0;
  for (; i + N <= n; i += N) s = hn::MulAdd(LoadF32<DT>(d, a, i), LoadF32<DT>(d, b, i), s);
  if (i < n) s = hn::MulAdd(LoadF32N<DT>(d, a, i, n - i), LoadF32N<DT>(d, b, i, n - i), s);
  return SumLanesInOrder(d, s);
}

// ---- exported entry points

void Widen(int dt, const void* src, std::int64_t n, float* dst) {
  WithDType(dt, [&](auto t) { WidenT<decltype(t)::value>(src, static_cast<std::size_t>(n), dst); });
}

void NarrowScaled(const float* src, std::int64_t n, float s, void* dst, int dt) {
  WithDType(dt, [&](auto t) {
    NarrowScaledT<decltype(t)::value>(src, static_cast<std::size_t>(n), s, dst);
  });
}

float TypedDot(const void* a, const void* b, int dt, std::int64_t n) {
  float r = 0.0f;
  WithDType(dt, [&](auto t) { r = TypedDotT<decltype(t)::value>(a, b, static_cast<std::size_t>(n)); });
  return r;
}

void Scores(const float* a, std::int64_t rows_a, const float* b, std::int64_t rows_b,
            std::int64_t ld, float scale, float* c, std::int64_t ldc) {
  const auto n = static_cast<std::size_t>(ld);
  for (std::int64_t r = 0; r < rows_a; ++r) {
    for (std::int64_t j = 0; j < rows_b; ++j) {
      c[r * ldc + j] = scale * DotF32(a + r * ld, b + j * ld, n);
    }
  }
}

float RowMax(const float* x, std::int64_t n_in) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(n_in);
  VF m = hn::Set(d, -HUGE_VALF);
  std::size_t i = 0;
  for (; i + N <= n; i += N) m = hn::Max(m, hn::LoadU(d, x + i));
  if (i < n) m = hn::Max(m, LoadF32N<kF32>(d, x, i, n - i, -HUGE_VALF));
  return FoldLanesInOrder(d, m, [](float r, float lane) { return lane > r ? lane : r; });
}

float ExpSub(float* x, std::int64_t n_in, float sub) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(n_in);
  const VF vs = hn::Set(d, sub);
  VF s = hn::Zero(d);
  std::size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i), vs));
    hn::StoreU(e, d, x + i);
    s = hn::Add(s, e);
  }
  if (i < n) {
    // The partial vector is padded with -inf, whose exp is 0.
    const VF e = ExpNonPositive(d, hn::Sub(LoadF32N<kF32>(d, x, i, n - i, -HUGE_VALF), vs));
    StoreF32N<kF32>(d, e, x, i, n - i);
    s = hn::Add(s, e);
  }
  return SumLanesInOrder(d, s);
}

void ExpSubEach(float* x, std::int64_t n_in, const float* sub) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(n_in);
  std::size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i), hn::LoadU(d, sub + i))), d, x + i);
  }
  if (i < n) {
    const VF e = ExpNonPositive(
        d, hn::Sub(LoadF32N<kF32>(d, x, i, n - i), LoadF32N<kF32>(d, sub, i, n - i)));
    StoreF32N<kF32>(d, e, x, i, n - i);
  }
}

void Scale(float* x, std::int64_t n_in, float a) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(n_in);
  const VF va = hn::Set(d, a);
  std::size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), va), d, x + i);
  for (; i < n; ++i) x[i] *= a;
}

void Accumulate(const float* coef, std::int64_t count, const float* rows, std::int64_t ld,
                float* acc) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(ld);
  std::size_t i = 0;
  // Four vectors of acc stay in registers while every row adds into them.
  for (; i + 4 * N <= n; i += 4 * N) {
    VF a0 = hn::LoadU(d, acc + i), a1 = hn::LoadU(d, acc + i + N);
    VF a2 = hn::LoadU(d, acc + i + 2 * N), a3 = hn::LoadU(d, acc + i + 3 * N);
    for (std::int64_t c = 0; c < count; ++c) {
      if (coef[c] == 0.0f) continue;
      const VF w = hn::Set(d, coef[c]);
      const float* row = rows + c * ld + i;
      a0 = hn::MulAdd(w, hn::LoadU(d, row), a0);
      a1 = hn::MulAdd(w, hn::LoadU(d, row + N), a1);
      a2 = hn::MulAdd(w, hn::LoadU(d, row + 2 * N), a2);
      a3 = hn::MulAdd(w, hn::LoadU(d, row + 3 * N), a3);
    }
    hn::StoreU(a0, d, acc + i);
    hn::StoreU(a1, d, acc + i + N);
    hn::StoreU(a2, d, acc + i + 2 * N);
    hn::StoreU(a3, d, acc + i + 3 * N);
  }
  for (; i + N <= n; i += N) {
    VF a = hn::LoadU(d, acc + i);
    for (std::int64_t c = 0; c < count; ++c) {
      if (coef[c] != 0.0f) a = hn::MulAdd(hn::Set(d, coef[c]), hn::LoadU(d, rows + c * ld + i), a);
    }
    hn::StoreU(a, d, acc + i);
  }
  for (; i < n; ++i) {  // only on targets wider than the 16-float padding
    for (std::int64_t c = 0; c < count; ++c) {
      if (coef[c] != 0.0f) acc[i] += coef[c] * rows[c * ld + static_cast<std::int64_t>(i)];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(Widen);
HWY_EXPORT(NarrowScaled);
HWY_EXPORT(TypedDot);
HWY_EXPORT(Scores);
HWY_EXPORT(RowMax);
HWY_EXPORT(ExpSub);
HWY_EXPORT(ExpSubEach);
HWY_EXPORT(Scale);
HWY_EXPORT(Accumulate);

namespace attn_simd {
namespace {
int code(DType t) { return static_cast<int>(t); }
}  // namespace

void widen(const void* src, DType t, std::int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(Widen)(code(t), src, n, dst);
}
void narrow_scaled(const float* src, std::int64_t n, float s, void* dst, DType t) {
  HWY_DYNAMIC_DISPATCH(NarrowScaled)(src, n, s, dst, code(t));
}
float typed_dot(const void* a, const void* b, DType t, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(TypedDot)(a, b, code(t), n);
}
void scores(const float* a, std::int64_t rows_a, const float* b, std::int64_t rows_b,
            std::int64_t ld, float scale, float* c, std::int64_t ldc) {
  HWY_DYNAMIC_DISPATCH(Scores)(a, rows_a, b, rows_b, ld, scale, c, ldc);
}
float row_max(const float* x, std::int64_t n) { return HWY_DYNAMIC_DISPATCH(RowMax)(x, n); }
float exp_sub(float* x, std::int64_t n, float sub) {
  return HWY_DYNAMIC_DISPATCH(ExpSub)(x, n, sub);
}
void exp_sub_each(float* x, std::int64_t n, const float* sub) {
  HWY_DYNAMIC_DISPATCH(ExpSubEach)(x, n, sub);
}
void scale(float* x, std::int64_t n, float a) { HWY_DYNAMIC_DISPATCH(Scale)(x, n, a); }
void accumulate(const float* coef, std::int64_t count, const float* rows, std::int64_t ld,
                float* acc) {
  HWY_DYNAMIC_DISPATCH(Accumulate)(coef, count, rows, ld, acc);
}

}  // namespace attn_simd
}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
