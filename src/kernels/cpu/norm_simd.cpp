// The vector building blocks of batch norm and layer norm, written once over Highway and
// compiled for every target (SSE4/AVX2/AVX3 on x86, NEON/SVE on arm64, and the 1-lane portable
// HWY_SCALAR); HWY_DYNAMIC_DISPATCH picks the best one allowed by max_isa(). Each call handles
// one contiguous run of values: a "row" kernel reduces the run to f32 sums or applies one scalar
// mean/scale to it; a "cols" kernel works lane by lane against per-column arrays (per-column
// f32 accumulators or parameters), for data whose statistics run down the columns: batch norm
// of [N, C] inputs and layer norm's dweight/dbias. kernels/cpu/norm.cpp splits the work into
// these runs, adds the runs' f32 sums in double and spreads the runs over threads.
//
// Sums use four accumulators combined in a fixed order (deterministic for a given target and
// run length); a run is at most a few thousand values, so its f32 rounding error stays near
// 2^-24 * len / (4 * lanes) relative before the caller widens it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/norm_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// Plain headers: compiled once (include guards), outside the per-target namespace.
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/norm_simd.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
// ---- row reductions ----

template <class T>
float RowSumT(const T* x, std::size_t len) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 4 * N <= len; i += 4 * N) {
    a0 = hn::Add(a0, LoadF32(df, x + i));
    a1 = hn::Add(a1, LoadF32(df, x + i + N));
    a2 = hn::Add(a2, LoadF32(df, x + i + 2 * N));
    a3 = hn::Add(a3, LoadF32(df, x + i + 3 * N));
  }
  for (; i < len; i += N) a0 = hn::Add(a0, LoadF32N(df, x + i, std::min(N, len - i)));  // tail lanes load 0
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

float RowSum(int tx, const void* x, std::int64_t len) {
  float r = 0.0f;
  WithDType(tx, [&](auto t) { r = RowSumT(static_cast<const Elem<decltype(t)>*>(x), static_cast<std::size_t>(len)); });
  return r;
}

template <class T>
float RowSqDevSumT(const T* x, std::size_t len, float mean) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean);
  auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 4 * N <= len; i += 4 * N) {
    const auto d0 = hn::Sub(LoadF32(df, x + i), m), d1 = hn::Sub(LoadF32(df, x + i + N), m);
    const auto d2 = hn::Sub(LoadF32(df, x + i + 2 * N), m), d3 = hn::Sub(LoadF32(df, x + i + 3 * N), m);
    a0 = hn::MulAdd(d0, d0, a0);
    a1 = hn::MulAdd(d1, d1, a1);
    a2 = hn::MulAdd(d2, d2, a2);
    a3 = hn::MulAdd(d3, d3, a3);
  }
  for (; i < len; i += N) {
    const std::size_t k = std::min(N, len - i);
    // Lanes past the tail hold 0 - mean: mask them out of the sum.
    const auto d = hn::IfThenElseZero(hn::FirstN(df, k), hn::Sub(LoadF32N(df, x + i, k), m));
    a0 = hn::MulAdd(d, d, a0);
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

float RowSqDevSum(int tx, const void* x, std::int64_t len, float mean) {
  float r = 0.0f;
  WithDType(tx, [&](auto t) {
    r = RowSqDevSumT(static_cast<const Elem<decltype(t)>*>(x), static_cast<std::size_t>(len), mean);
  });
  return r;
}

template <class TX, class TD>
void RowBwdSumsT(const TX* x, const TD* dy, std::size_t len, float mean, float* sum_dy,
                 float* sum_dy_xmu) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean);
  auto s0 = hn::Zero(df), s1 = s0, p0 = s0, p1 = s0;
  std::size_t i = 0;
  for (; i + 2 * N <= len; i += 2 * N) {
    const auto g0 = LoadF32(df, dy + i), g1 = LoadF32(df, dy + i + N);
    s0 = hn::Add(s0, g0);
    s1 = hn::Add(s1, g1);
    p0 = hn::MulAdd(g0, hn::Sub(LoadF32(df, x + i), m), p0);
    p1 = hn::MulAdd(g1, hn::Sub(LoadF32(df, x + i + N), m), p1);
  }
  for (; i < len; i += N) {
    const std::size_t k = std::min(N, len - i);
    const auto g = LoadF32N(df, dy + i, k);
    s0 = hn::Add(s0, g);
    const auto xm = hn::IfThenElseZero(hn::FirstN(df, k), hn::Sub(LoadF32N(df, x + i, k), m));
    p0 = hn::MulAdd(g, xm, p0);
  }
  *sum_dy = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
  *sum_dy_xmu = hn::GetLane(hn::SumOfLanes(df, hn::Add(p0, p1)));
}

void RowBwdSums(int tx, int tdy, const void* x, const void* dy, std::int64_t len, float mean,
                float* sum_dy, float* sum_dy_xmu) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      RowBwdSumsT(static_cast<const Elem<decltype(a)>*>(x), static_cast<const Elem<decltype(b)>*>(dy),
                  static_cast<std::size_t>(len), mean, sum_dy, sum_dy_xmu);
    });
  });
}

// ---- row maps with scalar parameters ----

template <class TX, class TY>
void RowAffineT(const TX* x, std::size_t len, float mean, float scale, float shift, TY* y) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), k = hn::Set(df, scale), b = hn::Set(df, shift);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    StoreF32N(df, hn::MulAdd(hn::Sub(LoadF32N(df, x + i, n), m), k, b), y + i, n);
  }
}

void RowAffine(int tx, int ty, const void* x, std::int64_t len, float mean, float scale,
               float shift, void* y) {
  WithDType(tx, [&](auto a) {
    WithDType(ty, [&](auto b) {
      RowAffineT(static_cast<const Elem<decltype(a)>*>(x), static_cast<std::size_t>(len), mean, scale,
                 shift, static_cast<Elem<decltype(b)>*>(y));
    });
  });
}

template <class TX, class TD, class TO>
void RowBwdDxT(const TX* x, const TD* dy, std::size_t len, float mean, float k1, float k2,
               float k3, TO* dx) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), v1 = hn::Set(df, k1), v2 = hn::Set(df, k2), v3 = hn::Set(df, k3);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto r = hn::MulAdd(hn::Sub(LoadF32N(df, x + i, n), m), v2, v3);
    StoreF32N(df, hn::MulAdd(LoadF32N(df, dy + i, n), v1, r), dx + i, n);
  }
}

void RowBwdDx(int tx, int tdy, int tdx, const void* x, const void* dy, std::int64_t len,
              float mean, float k1, float k2, float k3, void* dx) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      WithDType(tdx, [&](auto c) {
        RowBwdDxT(static_cast<const Elem<decltype(a)>*>(x), static_cast<const Elem<decltype(b)>*>(dy),
                  static_cast<std::size_t>(len), mean, k1, k2, k3, static_cast<Elem<decltype(c)>*>(dx));
      });
    });
  });
}

// ---- per-column kernels (batch norm of [N, C] and short planes) ----

// acc[j] += x[j], or (x[j] - mean[j])^2 when mean is not null.
template <class T>
void ColsAccT(const T* x, std::size_t len, const float* mean, float* acc) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    auto v = LoadF32N(df, x + i, n);
    if (mean != nullptr) {
      const auto d = hn::Sub(v, LoadF32N(df, mean + i, n));
      v = hn::Mul(d, d);
    }
    StoreF32N(df, hn::Add(LoadF32N(df, acc + i, n), v), acc + i, n);
  }
}

void ColsAcc(int tx, const void* x, std::int64_t len, const float* mean, float* acc) {
  WithDType(tx, [&](auto t) {
    ColsAccT(static_cast<const Elem<decltype(t)>*>(x), static_cast<std::size_t>(len), mean, acc);
  });
}

// acc_dy[j] += dy[j]; acc_dy_xmu[j] += dy[j] * (x[j] - mean[j]).
template <class TX, class TD>
void ColsBwdAccT(const TX* x, const TD* dy, std::size_t len, const float* mean, float* acc_dy,
                 float* acc_dy_xmu) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto g = LoadF32N(df, dy + i, n);
    const auto xm = hn::Sub(LoadF32N(df, x + i, n), LoadF32N(df, mean + i, n));
    StoreF32N(df, hn::Add(LoadF32N(df, acc_dy + i, n), g), acc_dy + i, n);
    StoreF32N(df, hn::MulAdd(g, xm, LoadF32N(df, acc_dy_xmu + i, n)), acc_dy_xmu + i, n);
  }
}

void ColsBwdAcc(int tx, int tdy, const void* x, const void* dy, std::int64_t len,
                const float* mean, float* acc_dy, float* acc_dy_xmu) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      ColsBwdAccT(static_cast<const Elem<decltype(a)>*>(x), static_cast<const Elem<decltype(b)>*>(dy),
                  static_cast<std::size_t>(len), mean, acc_dy, acc_dy_xmu);
    });
  });
}

// y[j] = (x[j] - mean[j]) * scale[j] + shift[j].
template <class TX, class TY>
void ColsAffineT(const TX* x, std::size_t len, const float* mean, const float* scale,
                 const float* shift, TY* y) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto d = hn::Sub(LoadF32N(df, x + i, n), LoadF32N(df, mean + i, n));
    StoreF32N(df, hn::MulAdd(d, LoadF32N(df, scale + i, n), LoadF32N(df, shift + i, n)), y + i, n);
  }
}

void ColsAffine(int tx, int ty, const void* x, std::int64_t len, const float* mean,
                const float* scale, const float* shift, void* y) {
  WithDType(tx, [&](auto a) {
    WithDType(ty, [&](auto b) {
      ColsAffineT(static_cast<const Elem<decltype(a)>*>(x), static_cast<std::size_t>(len), mean, scale,
                  shift, static_cast<Elem<decltype(b)>*>(y));
    });
  });
}

// dx[j] = dy[j] * k1[j] + ((x[j] - mean[j]) * k2[j] + k3[j]).
template <class TX, class TD, class TO>
void ColsBwdDxT(const TX* x, const TD* dy, std::size_t len, const float* mean, const float* k1,
                const float* k2, const float* k3, TO* dx) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto xm = hn::Sub(LoadF32N(df, x + i, n), LoadF32N(df, mean + i, n));
    const auto r = hn::MulAdd(xm, LoadF32N(df, k2 + i, n), LoadF32N(df, k3 + i, n));
    StoreF32N(df, hn::MulAdd(LoadF32N(df, dy + i, n), LoadF32N(df, k1 + i, n), r), dx + i, n);
  }
}

void ColsBwdDx(int tx, int tdy, int tdx, const void* x, const void* dy, std::int64_t len,
               const float* mean, const float* k1, const float* k2, const float* k3, void* dx) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      WithDType(tdx, [&](auto c) {
        ColsBwdDxT(static_cast<const Elem<decltype(a)>*>(x), static_cast<const Elem<decltype(b)>*>(dy),
                   static_cast<std::size_t>(len), mean, k1, k2, k3, static_cast<Elem<decltype(c)>*>(dx));
      });
    });
  });
}

// ---- layer norm rows: scalar mean/rstd of the row, per-column weight/bias ----

// y[j] = ((x[j] - mean) * rstd) * weight[j] + bias[j] (weight/bias f32, not null).
template <class TX, class TY>
void LnRowAffineT(const TX* x, std::size_t len, float mean, float rstd, const float* weight,
                  const float* bias, TY* y) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), rs = hn::Set(df, rstd);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto xhat = hn::Mul(hn::Sub(LoadF32N(df, x + i, n), m), rs);
    StoreF32N(df, hn::MulAdd(xhat, LoadF32N(df, weight + i, n), LoadF32N(df, bias + i, n)), y + i, n);
  }
}

void LnRowAffine(int tx, int ty, const void* x, std::int64_t len, float mean, float rstd,
                 const float* weight, const float* bias, void* y) {
  WithDType(tx, [&](auto a) {
    WithDType(ty, [&](auto b) {
      LnRowAffineT(static_cast<const Elem<decltype(a)>*>(x), static_cast<std::size_t>(len), mean, rstd,
                   weight, bias, static_cast<Elem<decltype(b)>*>(y));
    });
  });
}

// With g = dy * weight and xhat = (x - mean) * rstd: *sum_g = sum g, *sum_g_xhat = sum g * xhat.
template <class TX, class TD>
void LnRowBwdSumsT(const TX* x, const TD* dy, const float* weight, std::size_t len, float mean,
                   float rstd, float* sum_g, float* sum_g_xhat) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), rs = hn::Set(df, rstd);
  auto s0 = hn::Zero(df), s1 = s0, p0 = s0, p1 = s0;
  std::size_t i = 0;
  for (; i + 2 * N <= len; i += 2 * N) {
    const auto g0 = hn::Mul(LoadF32(df, dy + i), hn::LoadU(df, weight + i));
    const auto g1 = hn::Mul(LoadF32(df, dy + i + N), hn::LoadU(df, weight + i + N));
    s0 = hn::Add(s0, g0);
    s1 = hn::Add(s1, g1);
    p0 = hn::MulAdd(g0, hn::Mul(hn::Sub(LoadF32(df, x + i), m), rs), p0);
    p1 = hn::MulAdd(g1, hn::Mul(hn::Sub(LoadF32(df, x + i + N), m), rs), p1);
  }
  for (; i < len; i += N) {
    const std::size_t k = std::min(N, len - i);
    const auto g = hn::Mul(LoadF32N(df, dy + i, k), LoadF32N(df, weight + i, k));  // 0 past the tail
    s0 = hn::Add(s0, g);
    const auto xhat = hn::IfThenElseZero(hn::FirstN(df, k), hn::Mul(hn::Sub(LoadF32N(df, x + i, k), m), rs));
    p0 = hn::MulAdd(g, xhat, p0);
  }
  *sum_g = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
  *sum_g_xhat = hn::GetLane(hn::SumOfLanes(df, hn::Add(p0, p1)));
}

void LnRowBwdSums(int tx, int tdy, const void* x, const void* dy, const float* weight,
                  std::int64_t len, float mean, float rstd, float* sum_g, float* sum_g_xhat) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      LnRowBwdSumsT(static_cast<const Elem<decltype(a)>*>(x), static_cast<const Elem<decltype(b)>*>(dy),
                    weight, static_cast<std::size_t>(len), mean, rstd, sum_g, sum_g_xhat);
    });
  });
}

// dx[j] = rstd * (g - a - xhat * b) with g = dy * weight[j], xhat = (x - mean) * rstd.
template <class TX, class TD, class TO>
void LnRowBwdDxT(const TX* x, const TD* dy, const float* weight, std::size_t len, float mean,
                 float rstd, float a, float b, TO* dx) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), rs = hn::Set(df, rstd), va = hn::Set(df, a), vb = hn::Set(df, b);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto g = hn::Mul(LoadF32N(df, dy + i, n), LoadF32N(df, weight + i, n));
    const auto xhat = hn::Mul(hn::Sub(LoadF32N(df, x + i, n), m), rs);
    StoreF32N(df, hn::Mul(rs, hn::NegMulAdd(xhat, vb, hn::Sub(g, va))), dx + i, n);
  }
}

void LnRowBwdDx(int tx, int tdy, int tdx, const void* x, const void* dy, const float* weight,
                std::int64_t len, float mean, float rstd, float a, float b, void* dx) {
  WithDType(tx, [&](auto ta) {
    WithDType(tdy, [&](auto tb) {
      WithDType(tdx, [&](auto tc) {
        LnRowBwdDxT(static_cast<const Elem<decltype(ta)>*>(x), static_cast<const Elem<decltype(tb)>*>(dy),
                    weight, static_cast<std::size_t>(len), mean, rstd, a, b,
                    static_cast<Elem<decltype(tc)>*>(dx));
      });
    });
  });
}

// acc_w[j] += dy[j] * ((x[j] - mean) * rstd); acc_b[j] += dy[j].
template <class TX, class TD>
void LnColsAccT(const TX* x, const TD* dy, std::size_t len, float mean, float rstd,
                float* acc_w, float* acc_b) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), rs = hn::Set(df, rstd);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto g = LoadF32N(df, dy + i, n);
    const auto xhat = hn::Mul(hn::Sub(LoadF32N(df, x + i, n), m), rs);
    StoreF32N(df, hn::MulAdd(g, xhat, LoadF32N(df, acc_w + i, n)), acc_w + i, n);
    StoreF32N(df, hn::Add(LoadF32N(df, acc_b + i, n), g), acc_b + i, n);
  }
}

void LnColsAcc(int tx, int tdy, const void* x, const void* dy, std::int64_t len, float mean,
               float rstd, float* acc_w, float* acc_b) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      LnColsAccT(static_cast<const Elem<decltype(a)>*>(x), static_cast<const Elem<decltype(b)>*>(dy),
                 static_cast<std::size_t>(len), mean, rstd, acc_w, acc_b);
    });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {
HWY_EXPORT(RowSum);
HWY_EXPORT(RowSqDevSum);
HWY_EXPORT(RowBwdSums);
HWY_EXPORT(RowAffine);
HWY_EXPORT(RowBwdDx);
HWY_EXPORT(ColsAcc);
HWY_EXPORT(ColsBwdAcc);
HWY_EXPORT(ColsAffine);
HWY_EXPORT(ColsBwdDx);
HWY_EXPORT(LnRowAffine);
HWY_EXPORT(LnRowBwdSums);
HWY_EXPORT(LnRowBwdDx);
HWY_EXPORT(LnColsAcc);

namespace norm_simd {
namespace {
int code(DType t) { return static_cast<int>(t); }
}  // namespace

float row_sum(const void* x, DType t, std::int64_t len) {
  return HWY_DYNAMIC_DISPATCH(RowSum)(code(t), x, len);
}
float row_sq_dev_sum(const void* x, DType t, std::int64_t len, float mean) {
  return HWY_DYNAMIC_DISPATCH(RowSqDevSum)(code(t), x, len, mean);
}
void row_backward_sums(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                       float mean, float* sum_dy, float* sum_dy_xmu) {
  HWY_DYNAMIC_DISPATCH(RowBwdSums)(code(tx), code(tdy), x, dy, len, mean, sum_dy, sum_dy_xmu);
}
void row_affine(const void* x, DType tx, std::int64_t len, float mean, float scale, float shift,
                void* y, DType ty) {
  HWY_DYNAMIC_DISPATCH(RowAffine)(code(tx), code(ty), x, len, mean, scale, shift, y);
}
void row_backward_dx(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                     float mean, float k1, float k2, float k3, void* dx, DType tdx) {
  HWY_DYNAMIC_DISPATCH(RowBwdDx)(code(tx), code(tdy), code(tdx), x, dy, len, mean, k1, k2, k3, dx);
}
void cols_acc(const void* x, DType t, std::int64_t len, const float* mean, float* acc) {
  HWY_DYNAMIC_DISPATCH(ColsAcc)(code(t), x, len, mean, acc);
}
void cols_backward_acc(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                       const float* mean, float* acc_dy, float* acc_dy_xmu) {
  HWY_DYNAMIC_DISPATCH(ColsBwdAcc)(code(tx), code(tdy), x, dy, len, mean, acc_dy, acc_dy_xmu);
}
void cols_affine(const void* x, DType tx, std::int64_t len, const float* mean,
                 const float* scale, const float* shift, void* y, DType ty) {
  HWY_DYNAMIC_DISPATCH(ColsAffine)(code(tx), code(ty), x, len, mean, scale, shift, y);
}
void cols_backward_dx(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                      const float* mean, const float* k1, const float* k2, const float* k3,
                      void* dx, DType tdx) {
  HWY_DYNAMIC_DISPATCH(ColsBwdDx)(code(tx), code(tdy), code(tdx), x, dy, len, mean, k1, k2, k3, dx);
}
void ln_row_affine(const void* x, DType tx, std::int64_t len, float mean, float rstd,
                   const float* weight, const float* bias, void* y, DType ty) {
  HWY_DYNAMIC_DISPATCH(LnRowAffine)(code(tx), code(ty), x, len, mean, rstd, weight, bias, y);
}
void ln_row_backward_sums(const void* x, DType tx, const void* dy, DType tdy,
                          const float* weight, std::int64_t len, float mean, float rstd,
                          float* sum_g, float* sum_g_xhat) {
  HWY_DYNAMIC_DISPATCH(LnRowBwdSums)(code(tx), code(tdy), x, dy, weight, len, mean, rstd, sum_g,
                                     sum_g_xhat);
}
void ln_row_backward_dx(const void* x, DType tx, const void* dy, DType tdy, const float* weight,
                        std::int64_t len, float mean, float rstd, float a, float b, void* dx,
                        DType tdx) {
  HWY_DYNAMIC_DISPATCH(LnRowBwdDx)(code(tx), code(tdy), code(tdx), x, dy, weight, len, mean, rstd,
                                   a, b, dx);
}
void ln_cols_acc(const void* x, DType tx, const void* dy, DType tdy, std::int64_t len,
                 float mean, float rstd, float* acc_w, float* acc_b) {
  HWY_DYNAMIC_DISPATCH(LnColsAcc)(code(tx), code(tdy), x, dy, len, mean, rstd, acc_w, acc_b);
}

}  // namespace norm_simd
}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
