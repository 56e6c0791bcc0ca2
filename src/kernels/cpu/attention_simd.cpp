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

/// Row r of a strided operand of dtype code DT.
template <int DT>
const void* RowAt(const void* base, std::int64_t r, std::int64_t stride) {
  return static_cast<const char*>(base) + r * stride * static_cast<std::int64_t>(ElemBytes(DT));
}

// ---- exported entry points

void WidenRows(const void* src, int dt, std::int64_t rows, std::int64_t width,
               std::int64_t stride, float* dst, std::int64_t ld) {
  WithDType(dt, [&](auto t) {
    constexpr int DT = decltype(t)::value;
    for (std::int64_t r = 0; r < rows; ++r) {
      WidenT<DT>(RowAt<DT>(src, r, stride), static_cast<std::size_t>(width), dst + r * ld);
      std::fill(dst + r * ld + width, dst + (r + 1) * ld, 0.0f);
    }
  });
}

void WidenRowsTransposed(const void* src, int dt, std::int64_t rows, std::int64_t width,
                         std::int64_t stride, float* dst, std::int64_t ldt) {
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(width));
  WithDType(dt, [&](auto t) {
    constexpr int DT = decltype(t)::value;
    for (std::int64_t r = 0; r < rows; ++r) {
      WidenT<DT>(RowAt<DT>(src, r, stride), static_cast<std::size_t>(width), row.data());
      for (std::int64_t k = 0; k < width; ++k) dst[k * ldt + r] = row[static_cast<std::size_t>(k)];
    }
  });
  for (std::int64_t k = 0; k < width; ++k) std::fill(dst + k * ldt + rows, dst + (k + 1) * ldt, 0.0f);
}

void NarrowRows(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t width,
                const float* row_scale, void* dst, int dt, std::int64_t stride) {
  WithDType(dt, [&](auto t) {
    constexpr int DT = decltype(t)::value;
    for (std::int64_t r = 0; r < rows; ++r) {
      NarrowScaledT<DT>(src + r * ld, static_cast<std::size_t>(width), row_scale[r],
                        const_cast<void*>(RowAt<DT>(dst, r, stride)));
    }
  });
}

float TypedDot(const void* a, const void* b, int dt, std::int64_t n) {
  float r = 0.0f;
  WithDType(dt, [&](auto t) { r = TypedDotT<decltype(t)::value>(a, b, static_cast<std::size_t>(n)); });
  return r;
}

// The tile products (s = scale q k^T; acc += p v; the backward's four) as one register-blocked
// kernel: C[m, n] (+)= A[m, kdim] B[kdim, n] with B row-major, kRows rows of A at a time, each
// row's k-th value broadcast against whole vectors of B's k-th row. A is read through strides,
// so a tile stored transposed is used as it lies (no transposition per tile). Every element of
// C is one in-order sum over k with an FMA per term, so no target folds lanes and the result
// does not depend on the vector width; for short heads (32 floats: two AVX-512 vectors) dot
// products of rows were dominated by their lane folding.
constexpr std::int64_t kRows = 4;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr std::int64_t kWideRows = 8;  // 16 sums of the 32 registers
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
constexpr std::int64_t kWideRows = 6;  // 12 sums, 2 rows of B and a broadcast: 15 of 16
#endif

template <bool kAccumulate>
void MicroGemm(const float* a, std::int64_t a_rs, std::int64_t a_ks, std::int64_t m,
               std::int64_t kdim, const float* b, std::int64_t ldb, std::int64_t n, float scale,
               float* c, std::int64_t ldc) {
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
  std::int64_t r0 = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  // AVX-512's 32 registers hold 8 rows x 2 vectors of sums, AVX2's 16 hold 6 x 2: fewer loads
  // of B per FMA than the 4-row block (the same sums in the same order).
  if (n % (2 * N) == 0) {
    for (; r0 + kWideRows <= m; r0 += kWideRows) {
      for (std::int64_t j0 = 0; j0 < n; j0 += 2 * N) {
        VF s0[kWideRows], s1[kWideRows];
        const float* ar[kWideRows];
        for (std::int64_t rr = 0; rr < kWideRows; ++rr) {
          s0[rr] = hn::Zero(d);
          s1[rr] = hn::Zero(d);
          ar[rr] = a + (r0 + rr) * a_rs;
        }
        const float* row = b + j0;
        for (std::int64_t k = 0; k < kdim; ++k, row += ldb) {
          const VF b0 = hn::LoadU(d, row), b1 = hn::LoadU(d, row + N);
          const std::int64_t off = k * a_ks;
          for (std::int64_t rr = 0; rr < kWideRows; ++rr) {
            const VF w = hn::Set(d, ar[rr][off]);
            s0[rr] = hn::MulAdd(w, b0, s0[rr]);
            s1[rr] = hn::MulAdd(w, b1, s1[rr]);
          }
        }
        for (std::int64_t rr = 0; rr < kWideRows; ++rr) {
          float* out = c + (r0 + rr) * ldc + j0;
          hn::StoreU(finish(s0[rr], out), d, out);
          hn::StoreU(finish(s1[rr], out + N), d, out + N);
        }
      }
    }
  }
#endif
  for (; r0 < m; r0 += kRows) {
    const float* ar[kRows];
    for (std::int64_t rr = 0; rr < kRows; ++rr) ar[rr] = a + std::min(r0 + rr, m - 1) * a_rs;
    const std::int64_t nr = std::min(kRows, m - r0);
    std::int64_t j0 = 0;
    for (; j0 + 2 * N <= n; j0 += 2 * N) {
      VF s00 = hn::Zero(d), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00,
         s31 = s00;
      const float* row = b + j0;
      const float *p0 = ar[0], *p1 = ar[1], *p2 = ar[2], *p3 = ar[3];
      for (std::int64_t k = 0; k < kdim; ++k, row += ldb, p0 += a_ks, p1 += a_ks, p2 += a_ks,
                        p3 += a_ks) {
        const VF b0 = hn::LoadU(d, row), b1 = hn::LoadU(d, row + N);
        const VF w0 = hn::Set(d, *p0), w1 = hn::Set(d, *p1);
        const VF w2 = hn::Set(d, *p2), w3 = hn::Set(d, *p3);
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
        s0 = hn::MulAdd(hn::Set(d, ar[0][k * a_ks]), b0, s0);
        s1 = hn::MulAdd(hn::Set(d, ar[1][k * a_ks]), b0, s1);
        s2 = hn::MulAdd(hn::Set(d, ar[2][k * a_ks]), b0, s2);
        s3 = hn::MulAdd(hn::Set(d, ar[3][k * a_ks]), b0, s3);
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
        for (std::int64_t k = 0; k < kdim; ++k) {
          sum = std::fma(ar[rr][k * a_ks], b[k * ldb + j0], sum);
        }
        float& out = c[(r0 + rr) * ldc + j0];
        out = kAccumulate ? out + sum : sum * scale;
      }
    }
  }
}

bool AllFinite(const float* x, std::int64_t rows, std::int64_t ld, std::int64_t n_in) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(n_in);
  const VF inf = hn::Set(d, HUGE_VALF);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    auto ok = hn::Eq(hn::Zero(d), hn::Zero(d));
    std::size_t i = 0;
    for (; i + N <= n; i += N) ok = hn::And(ok, hn::Lt(hn::Abs(hn::LoadU(d, row + i)), inf));
    if (!hn::AllTrue(d, ok)) return false;
    for (; i < n; ++i) {
      if (!std::isfinite(row[i])) return false;
    }
  }
  return true;
}

/// acc[0..n) += sum over k < count of coef[k] * rows[k * ld ..], k ascending, skipping zero
/// coefficients: the accumulate of rows that hold inf or NaN.
void AccumulateSkippingZeros(const float* coef, std::int64_t count, const float* rows,
                             std::int64_t ld, std::int64_t n_in, float* acc) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(n_in);
  std::size_t i = 0;
  for (; i + N <= n; i += N) {
    VF sum = hn::Zero(d);
    for (std::int64_t k = 0; k < count; ++k) {
      if (coef[k] != 0.0f) sum = hn::MulAdd(hn::Set(d, coef[k]), hn::LoadU(d, rows + k * ld + i), sum);
    }
    hn::StoreU(hn::Add(hn::LoadU(d, acc + i), sum), d, acc + i);
  }
  for (; i < n; ++i) {  // only on targets wider than the 16-float padding
    float sum = 0.0f;
    for (std::int64_t k = 0; k < count; ++k) {
      if (coef[k] != 0.0f) sum = std::fma(coef[k], rows[k * ld + static_cast<std::int64_t>(i)], sum);
    }
    acc[i] += sum;
  }
}

void TileProduct(const float* a, std::int64_t a_rs, std::int64_t a_ks, std::int64_t m,
                 std::int64_t kdim, const float* b, std::int64_t ldb, std::int64_t n, float scale,
                 float* c, std::int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (!accumulate) {
    MicroGemm<false>(a, a_rs, a_ks, m, kdim, b, ldb, n, scale, c, ldc);
    return;
  }
  if (kdim <= 0) return;
  if (AllFinite(b, kdim, ldb, n)) {
    // Finite rows: a zero coefficient adds exactly +-0, which leaves every sum as skipping it
    // would (a sum that starts at +0 never becomes -0), so the blocked kernel needs no test.
    MicroGemm<true>(a, a_rs, a_ks, m, kdim, b, ldb, n, 1.0f, c, ldc);
    return;
  }
  thread_local std::vector<float> coef;
  coef.resize(static_cast<std::size_t>(kdim));
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t k = 0; k < kdim; ++k) coef[static_cast<std::size_t>(k)] = a[r * a_rs + k * a_ks];
    AccumulateSkippingZeros(coef.data(), kdim, b, ldb, n, c + r * ldc);
  }
}

void OnlineSoftmaxColumns(float* s, std::int64_t keys, std::int64_t ld, std::int64_t n,
                          float* m, float* l, float* alpha) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF neg_inf = hn::Set(d, -HUGE_VALF), one = hn::Set(d, 1.0f);
  std::int64_t q = 0;
  for (; q + N <= n; q += N) {
    const VF m_old = hn::LoadU(d, m + q);
    VF mx = m_old;
    for (std::int64_t j = 0; j < keys; ++j) mx = hn::Max(mx, hn::LoadU(d, s + j * ld + q));
    // While a column has seen only masked keys its max is -inf: subtracting 0 instead keeps
    // e^(-inf) = 0 for its scores and alpha.
    const VF ms = hn::IfThenZeroElse(hn::Eq(mx, neg_inf), mx);
    const VF a = hn::IfThenElse(hn::Eq(m_old, ms), one, ExpNonPositive(d, hn::Sub(m_old, ms)));
    VF sum = hn::Zero(d);
    for (std::int64_t j = 0; j < keys; ++j) {
      const VF e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, s + j * ld + q), ms));
      hn::StoreU(e, d, s + j * ld + q);
      sum = hn::Add(sum, e);
    }
    hn::StoreU(hn::Add(hn::Mul(hn::LoadU(d, l + q), a), sum), d, l + q);
    hn::StoreU(mx, d, m + q);
    hn::StoreU(a, d, alpha + q);
  }
  for (; q < n; ++q) {  // only on targets wider than the 16-float padding
    float mx = m[q];
    for (std::int64_t j = 0; j < keys; ++j) mx = std::max(mx, s[j * ld + q]);
    const float ms = mx == -HUGE_VALF ? 0.0f : mx;
    const float a = m[q] == ms ? 1.0f : std::exp(m[q] - ms);
    float sum = 0.0f;
    for (std::int64_t j = 0; j < keys; ++j) {
      float& x = s[j * ld + q];
      x = std::exp(x - ms);
      sum += x;
    }
    l[q] = l[q] * a + sum;
    m[q] = mx;
    alpha[q] = a;
  }
}

void ExpSubRows(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n, const float* sub) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    const VF vs = hn::Set(d, sub[r]);
    std::int64_t c = 0;
    for (; c + N <= n; c += N) {
      hn::StoreU(ExpNonPositive(d, hn::Sub(hn::LoadU(d, row + c), vs)), d, row + c);
    }
    for (; c < n; ++c) row[c] = std::exp(row[c] - sub[r]);
  }
}

void ExpSubColumns(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n,
                   const float* sub) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    std::int64_t c = 0;
    for (; c + N <= n; c += N) {
      hn::StoreU(ExpNonPositive(d, hn::Sub(hn::LoadU(d, row + c), hn::LoadU(d, sub + c))), d,
                 row + c);
    }
    for (; c < n; ++c) row[c] = std::exp(row[c] - sub[c]);
  }
}

void SoftmaxGrad(const float* p, float* dp, std::int64_t rows, std::int64_t ld, std::int64_t n,
                 const float* di, bool di_per_row) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * ld;
    float* g = dp + r * ld;
    std::int64_t c = 0;
    for (; c + N <= n; c += N) {
      const VF dd = di_per_row ? hn::Set(d, di[r]) : hn::LoadU(d, di + c);
      hn::StoreU(hn::Mul(hn::LoadU(d, pr + c), hn::Sub(hn::LoadU(d, g + c), dd)), d, g + c);
    }
    for (; c < n; ++c) g[c] = pr[c] * (g[c] - (di_per_row ? di[r] : di[c]));
  }
}

/// v rounded to the 16-bit dtype code DT and widened back, in registers (the bit-level
/// conversions of convert-inl.h, the same rounding as the storage conversion).
template <int DT>
HWY_INLINE VF RoundTrip(DF d, VF v) {
  const DU du;
  if constexpr (DT == kBF16) {
    return cvt::Bf16BitsToF32(d, cvt::F32ToBf16Bits(du, hn::BitCast(du, v)));
  } else {
    return cvt::F16BitsToF32(d, cvt::F32ToF16Bits(du, hn::BitCast(du, v)));
  }
}

void RoundRows(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n, int dt) {
  WithDType(dt, [&](auto t) {
    constexpr int DT = decltype(t)::value;
    if constexpr (DT != kF32) {
      const DF d;
      const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
      for (std::int64_t r = 0; r < rows; ++r) {
        float* row = x + r * ld;
        std::int64_t c = 0;
        for (; c + N <= n; c += N) hn::StoreU(RoundTrip<DT>(d, hn::LoadU(d, row + c)), d, row + c);
        for (; c < n; ++c) row[c] = static_cast<float>(Storage<DT>(row[c]));
      }
    }
  });
}

void Scale(float* x, std::int64_t n_in, float a) {
  const DF d;
  const std::size_t N = hn::Lanes(d), n = static_cast<std::size_t>(n_in);
  const VF va = hn::Set(d, a);
  std::size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), va), d, x + i);
  for (; i < n; ++i) x[i] *= a;
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(WidenRows);
HWY_EXPORT(WidenRowsTransposed);
HWY_EXPORT(NarrowRows);
HWY_EXPORT(TypedDot);
HWY_EXPORT(TileProduct);
HWY_EXPORT(OnlineSoftmaxColumns);
HWY_EXPORT(ExpSubRows);
HWY_EXPORT(ExpSubColumns);
HWY_EXPORT(SoftmaxGrad);
HWY_EXPORT(RoundRows);
HWY_EXPORT(Scale);

namespace attn_simd {
namespace {
int code(DType t) { return static_cast<int>(t); }
}  // namespace

void widen_rows(const void* src, DType t, std::int64_t rows, std::int64_t width,
                std::int64_t stride, float* dst, std::int64_t ld) {
  HWY_DYNAMIC_DISPATCH(WidenRows)(src, code(t), rows, width, stride, dst, ld);
}
void widen_rows_transposed(const void* src, DType t, std::int64_t rows, std::int64_t width,
                           std::int64_t stride, float* dst, std::int64_t ldt) {
  HWY_DYNAMIC_DISPATCH(WidenRowsTransposed)(src, code(t), rows, width, stride, dst, ldt);
}
void narrow_rows(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t width,
                 const float* row_scale, void* dst, DType t, std::int64_t stride) {
  HWY_DYNAMIC_DISPATCH(NarrowRows)(src, ld, rows, width, row_scale, dst, code(t), stride);
}
float typed_dot(const void* a, const void* b, DType t, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(TypedDot)(a, b, code(t), n);
}
void tile_product(const float* a, std::int64_t a_rs, std::int64_t a_ks, std::int64_t m,
                  std::int64_t kdim, const float* b, std::int64_t ldb, std::int64_t n, float scale,
                  float* c, std::int64_t ldc, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(TileProduct)(a, a_rs, a_ks, m, kdim, b, ldb, n, scale, c, ldc, accumulate);
}
void online_softmax_columns(float* s, std::int64_t keys, std::int64_t ld, std::int64_t n,
                            float* m, float* l, float* alpha) {
  HWY_DYNAMIC_DISPATCH(OnlineSoftmaxColumns)(s, keys, ld, n, m, l, alpha);
}
void exp_sub_rows(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n, const float* sub) {
  HWY_DYNAMIC_DISPATCH(ExpSubRows)(x, rows, ld, n, sub);
}
void exp_sub_columns(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n,
                     const float* sub) {
  HWY_DYNAMIC_DISPATCH(ExpSubColumns)(x, rows, ld, n, sub);
}
void softmax_grad(const float* p, float* dp, std::int64_t rows, std::int64_t ld, std::int64_t n,
                  const float* di, bool di_per_row) {
  HWY_DYNAMIC_DISPATCH(SoftmaxGrad)(p, dp, rows, ld, n, di, di_per_row);
}
void round_rows(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n, DType t) {
  HWY_DYNAMIC_DISPATCH(RoundRows)(x, rows, ld, n, code(t));
}
void scale(float* x, std::int64_t n, float a) { HWY_DYNAMIC_DISPATCH(Scale)(x, n, a); }

}  // namespace attn_simd
}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
