// The vector building blocks of the blocked attention kernel over Highway, one source for every
// target (dispatcher: attention.cpp). Everything works on f32 scratch rows; 16-bit q, k, v and
// dout are widened once per block through convert-inl.h. Dot products and row sums fold their
// lanes in lane order, so each target is deterministic.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include <algorithm>
#include <cmath>
#include <vector>

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

// The tile products (s = scale q k^T; acc += p v; the backward's four) as one register-blocked
// kernel: C[m, n] (+)= A[m, kdim] B[kdim, n] with B row-major, kRows rows of A at a time, each
// row's k-th value broadcast against whole vectors of B's k-th row. Every element of C is one
// in-order sum over k with an FMA per term (the order the per-row loops had), so no target
// folds lanes and the result does not depend on the vector width; for short heads (32 floats:
// two AVX-512 vectors) dot products of rows were dominated by their lane folding.
constexpr std::int64_t kRows = 4;

template <bool kAccumulate>
void MicroGemm(const float* a, std::int64_t m, std::int64_t kdim, std::int64_t lda, const float* b,
               std::int64_t ldb, std::int64_t n, float scale, float* c, std::int64_t ldc) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF vs = hn::Set(d, scale);
  const auto finish = [&](VF sum, const float* old) {
    if constexpr (kAccumulate) {
      return hn::Add(hn::LoadU(d, old), sum);
    } else {
      return hn::Mul(sum, vs);
    }
  };
  for (std::int64_t r0 = 0; r0 < m; r0 += kRows) {
    const float* ar[kRows];
    for (std::int64_t rr = 0; rr < kRows; ++rr) ar[rr] = a + std::min(r0 + rr, m - 1) * lda;
    const std::int64_t nr = std::min(kRows, m - r0);
    std::int64_t j0 = 0;
    for (; j0 + 2 * N <= n; j0 += 2 * N) {
      VF s00 = hn::Zero(d), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00,
         s31 = s00;
      const float* row = b + j0;
      for (std::int64_t k = 0; k < kdim; ++k, row += ldb) {
        const VF b0 = hn::LoadU(d, row), b1 = hn::LoadU(d, row + N);
        const VF w0 = hn::Set(d, ar[0][k]), w1 = hn::Set(d, ar[1][k]);
        const VF w2 = hn::Set(d, ar[2][k]), w3 = hn::Set(d, ar[3][k]);
        s00 = hn::MulAdd(w0, b0, s00);
        s01 = hn::MulAdd(w0, b1, s01);
        s10 = hn::MulAdd(w1, b0, s10);
        s11 = hn::MulAdd(w1, b1, s11);
        s20 = hn::MulAdd(w2, b0, s20);
        s21 = hn::MulAdd(w2, b1, s21);
        s30 = hn::MulAdd(w3, b0, s30);
        s31 = hn::MulAdd(w3, b1, s31);
      }
      // (No arrays of vectors: SVE vectors are sizeless.)
      const auto store_row = [&](std::int64_t rr, VF v0, VF v1) {
        if (rr >= nr) return;
        float* out = c + (r0 + rr) * ldc + j0;
        hn::StoreU(finish(v0, out), d, out);
        hn::StoreU(finish(v1, out + N), d, out + N);
      };
      store_row(0, s00, s01);
      store_row(1, s10, s11);
      store_row(2, s20, s21);
      store_row(3, s30, s31);
    }
    for (; j0 + N <= n; j0 += N) {
      VF s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
      const float* row = b + j0;
      for (std::int64_t k = 0; k < kdim; ++k, row += ldb) {
        const VF b0 = hn::LoadU(d, row);
        s0 = hn::MulAdd(hn::Set(d, ar[0][k]), b0, s0);
        s1 = hn::MulAdd(hn::Set(d, ar[1][k]), b0, s1);
        s2 = hn::MulAdd(hn::Set(d, ar[2][k]), b0, s2);
        s3 = hn::MulAdd(hn::Set(d, ar[3][k]), b0, s3);
      }
      const auto store_row = [&](std::int64_t rr, VF v) {
        if (rr >= nr) return;
        float* out = c + (r0 + rr) * ldc + j0;
        hn::StoreU(finish(v, out), d, out);
      };
      store_row(0, s0);
      store_row(1, s1);
      store_row(2, s2);
      store_row(3, s3);
    }
    for (; j0 < n; ++j0) {  // only on targets wider than the 16-float padding
      for (std::int64_t rr = 0; rr < nr; ++rr) {
        float sum = 0.0f;
        for (std::int64_t k = 0; k < kdim; ++k) sum = std::fma(ar[rr][k], b[k * ldb + j0], sum);
        float& out = c[(r0 + rr) * ldc + j0];
        out = kAccumulate ? out + sum : sum * scale;
      }
    }
  }
}

bool AllFinite(const float* x, std::int64_t rows, std::int64_t ld) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(rows * ld);
  const VF inf = hn::Set(d, HUGE_VALF);
  auto ok = hn::Eq(hn::Zero(d), hn::Zero(d));
  std::size_t i = 0;
  for (; i + N <= n; i += N) ok = hn::And(ok, hn::Lt(hn::Abs(hn::LoadU(d, x + i)), inf));
  if (!hn::AllTrue(d, ok)) return false;
  for (; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

void Scores(const float* a, std::int64_t rows_a, const float* b, std::int64_t rows_b,
            std::int64_t ld, float scale, float* c, std::int64_t ldc) {
  if (rows_a <= 0 || rows_b <= 0) return;
  // b's tile transposed once, its columns padded with zeros to a multiple of 16 (every x86
  // vector width divides it; ldc is a multiple of 16 too, so the padded columns fit in c).
  const std::int64_t cols = (rows_b + 15) / 16 * 16;
  thread_local std::vector<float> bt_buffer;
  bt_buffer.assign(static_cast<std::size_t>(ld * cols), 0.0f);
  float* bt = bt_buffer.data();
  for (std::int64_t j = 0; j < rows_b; ++j) {
    for (std::int64_t k = 0; k < ld; ++k) bt[k * cols + j] = b[j * ld + k];
  }
  MicroGemm<false>(a, rows_a, ld, ld, bt, cols, std::min(cols, ldc), scale, c, ldc);
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

void AccumulateRows(const float* coef, std::int64_t m, std::int64_t count, std::int64_t ldcoef,
                    const float* rows, std::int64_t ld, float* acc, std::int64_t ldacc) {
  if (m <= 0 || count <= 0) return;
  if (AllFinite(rows, count, ld)) {
    // Finite rows: a zero coefficient adds exactly +-0, which leaves every sum as skipping it
    // would (a sum that starts at +0 never becomes -0), so the blocked kernel needs no test.
    MicroGemm<true>(coef, m, count, ldcoef, rows, ld, ld, 1.0f, acc, ldacc);
    return;
  }
  for (std::int64_t r = 0; r < m; ++r) Accumulate(coef + r * ldcoef, count, rows, ld, acc + r * ldacc);
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
HWY_EXPORT(AccumulateRows);

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
void accumulate_rows(const float* coef, std::int64_t m, std::int64_t count, std::int64_t ldcoef,
                     const float* rows, std::int64_t ld, float* acc, std::int64_t ldacc) {
  HWY_DYNAMIC_DISPATCH(AccumulateRows)(coef, m, count, ldcoef, rows, ld, acc, ldacc);
}

}  // namespace attn_simd
}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
