// Softmax, log-softmax and cross-entropy row kernels over Highway, one source for every target
// (dispatcher: softmax.cpp). Each works on a range of one row (the dispatcher cuts long rows
// into fixed chunks and combines the partial sums in order). Everything is computed in f32
// whatever the storage dtype; exp is Highway's contrib Exp (documented 1 ulp), which the
// forward passes only ever call on x - max <= 0 (finite max; the dispatcher handles rows whose
// max is NaN or infinite), where it is exact in range and returns 0 below -104.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/softmax_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include <cmath>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/softmax_simd.h"
#include "kernels/spec/nan_minmax.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
/// e^x for any x: Highway's Exp is specified on [-FLT_MAX, 104] and maps NaN to 0, so clamp
/// above (e^89 already overflows to Inf) and pass NaN through, as std::exp does.
HWY_INLINE VF ExpAny(DF d, VF x) {
  const VF e = hn::Exp(d, hn::Min(x, hn::Set(d, 89.0f)));
  return hn::IfThenElse(hn::IsNaN(x), x, e);
}

/// The NaN-propagating row max (the value; which NaN does not matter, the row becomes NaN).
template <int DT>
float MaxT(const void* x, std::size_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const auto step = [](VF acc, VF v) {
    return hn::IfThenElse(hn::IsNaN(acc), acc, hn::IfThenElse(hn::Gt(acc, v), acc, v));
  };
  VF a0 = hn::Set(d, -HUGE_VALF), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = step(a0, LoadF32<DT>(d, x, i));
    a1 = step(a1, LoadF32<DT>(d, x, i + N));
    a2 = step(a2, LoadF32<DT>(d, x, i + 2 * N));
    a3 = step(a3, LoadF32<DT>(d, x, i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = step(a0, LoadF32<DT>(d, x, i));
  if (i < n) a1 = step(a1, LoadF32N<DT>(d, x, i, n - i, -HUGE_VALF));
  return FoldLanesInOrder(d, step(step(a0, a1), step(a2, a3)),
                          [](float m, float lane) { return kernels::nan_max(m, lane); });
}

/// sum exp(x - m), and optionally sum (x - m) and the exps themselves (f32), over n elements.
template <int DT>
void ExpStatsT(const void* x, std::size_t n, float m, float* sum_exp, float* sum_shifted,
               float* e_out) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF vm = hn::Set(d, m);
  VF s0 = hn::Zero(d), s1 = s0, t0 = s0, t1 = s0;
  std::size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const VF x0 = hn::Sub(LoadF32<DT>(d, x, i), vm);
    const VF x1 = hn::Sub(LoadF32<DT>(d, x, i + N), vm);
    const VF e0 = hn::Exp(d, x0), e1 = hn::Exp(d, x1);
    s0 = hn::Add(s0, e0);
    s1 = hn::Add(s1, e1);
    if (sum_shifted) {
      t0 = hn::Add(t0, x0);
      t1 = hn::Add(t1, x1);
    }
    if (e_out) {
      hn::StoreU(e0, d, e_out + i);
      hn::StoreU(e1, d, e_out + i + N);
    }
  }
  for (; i < n; i += N) {
    // The last vectors; a partial one is padded with m (shift 0) and its exps masked off.
    const std::size_t count = n - i < N ? n - i : N;
    const VF xv = LoadF32N<DT>(d, x, i, count, m);
    const VF x0 = hn::Sub(xv, vm);
    const VF e0 = hn::IfThenElseZero(hn::FirstN(d, count), hn::Exp(d, x0));
    s0 = hn::Add(s0, e0);
    if (sum_shifted) t0 = hn::Add(t0, x0);
    if (e_out) {
      if (count == N) {
        hn::StoreU(e0, d, e_out + i);
      } else {
        StoreF32N<0>(d, e0, e_out, i, count);
      }
    }
  }
  *sum_exp = SumLanesInOrder(d, hn::Add(s0, s1));
  if (sum_shifted) *sum_shifted = SumLanesInOrder(d, hn::Add(t0, t1));
}

/// Calls f(i, count) for each vector of [0, n): full vectors, then one partial (count < N).
template <class F>
HWY_INLINE void ForVectors(DF d, std::size_t n, F&& f) {
  const std::size_t N = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + N <= n; i += N) f(i, N);
  if (i < n) f(i, n - i);
}

/// y = e * inv, e the exps stored by ExpStats (f32) or, when e is null, recomputed exp(x - m).
template <int DTI, int DTO>
void SoftmaxOutT(const void* x, std::size_t n, float m, float inv, const float* e, void* y) {
  const DF d;
  const VF vm = hn::Set(d, m), vinv = hn::Set(d, inv);
  ForVectors(d, n, [&](std::size_t i, std::size_t count) {
    const VF ev = e ? LoadF32N<0>(d, e, i, count, 0.0f)
                    : hn::Exp(d, hn::Sub(LoadF32N<DTI>(d, x, i, count, m), vm));
    StoreF32N<DTO>(d, hn::Mul(ev, vinv), y, i, count);
  });
}

/// y = (x - m) - lse.
template <int DTI, int DTO>
void LogSoftmaxOutT(const void* x, std::size_t n, float m, float lse, void* y) {
  const DF d;
  const VF vm = hn::Set(d, m), vlse = hn::Set(d, lse);
  ForVectors(d, n, [&](std::size_t i, std::size_t count) {
    StoreF32N<DTO>(d, hn::Sub(hn::Sub(LoadF32N<DTI>(d, x, i, count, m), vm), vlse), y, i, count);
  });
}

/// d = g * (exp(x - m) * inv - q), q = q_on at element t (t may lie outside [0, n)), else q_off.
template <int DTI, int DTO>
void CrossEntropyBackOutT(const void* x, std::size_t n, float m, float inv, float g, float q_off,
                          float q_on, std::int64_t t, void* out) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const VF vm = hn::Set(d, m), vinv = hn::Set(d, inv), vg = hn::Set(d, g);
  const VF voff = hn::Set(d, q_off), von = hn::Set(d, q_on);
  // Lane index of the target relative to each vector (int32: rows are cut in chunks < 2^31).
  const auto lane = hn::Iota(di, 0);
  ForVectors(d, n, [&](std::size_t i, std::size_t count) {
    const VF e = hn::Exp(d, hn::Sub(LoadF32N<DTI>(d, x, i, count, m), vm));
    const auto at_t = hn::RebindMask(
        d, hn::Eq(lane, hn::Set(di, static_cast<std::int32_t>(t - static_cast<std::int64_t>(i)))));
    const VF q = hn::IfThenElse(at_t, von, voff);
    StoreF32N<DTO>(d, hn::Mul(vg, hn::MulSub(e, vinv, q)), out, i, count);
  });
}

/// sum dy * y (softmax backward), or sum dy when y is null (log-softmax backward).
template <int DTY, int DTG>
float DotT(const void* y, const void* dy, std::size_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  const auto term = [&](std::size_t i, std::size_t count) {
    const VF g = LoadF32N<DTG>(d, dy, i, count, 0.0f);
    return y ? hn::Mul(g, LoadF32N<DTY>(d, y, i, count, 0.0f)) : g;
  };
  std::size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, term(i, N));
    a1 = hn::Add(a1, term(i + N, N));
    a2 = hn::Add(a2, term(i + 2 * N, N));
    a3 = hn::Add(a3, term(i + 3 * N, N));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, term(i, N));
  if (i < n) a1 = hn::Add(a1, term(i, n - i));
  return SumLanesInOrder(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)));
}

/// softmax: dx = y * (dy - s); log-softmax: dx = dy - exp(y) * s.
template <int DTY, int DTG, int DTO>
void BackOutT(const void* y, const void* dy, std::size_t n, float s, bool log, void* dx) {
  const DF d;
  const VF vs = hn::Set(d, s);
  ForVectors(d, n, [&](std::size_t i, std::size_t count) {
    const VF yv = LoadF32N<DTY>(d, y, i, count, 0.0f);
    const VF g = LoadF32N<DTG>(d, dy, i, count, 0.0f);
    const VF r = log ? hn::NegMulAdd(ExpAny(d, yv), vs, g) : hn::Mul(yv, hn::Sub(g, vs));
    StoreF32N<DTO>(d, r, dx, i, count);
  });
}

// ---- exported entry points: run-time dtype codes to templates ----

float RowMax(int dt, const void* x, std::int64_t n) {
  float m = 0.0f;
  WithDType(dt, [&](auto t) { m = MaxT<decltype(t)::value>(x, static_cast<std::size_t>(n)); });
  return m;
}

void ExpStats(int dt, const void* x, std::int64_t n, float m, float* sum_exp, float* sum_shifted,
              float* e_out) {
  WithDType(dt, [&](auto t) {
    ExpStatsT<decltype(t)::value>(x, static_cast<std::size_t>(n), m, sum_exp, sum_shifted, e_out);
  });
}

void SoftmaxOut(int dti, const void* x, std::int64_t n, float m, float inv, const float* e,
                int dto, void* y) {
  WithDType(dti, [&](auto ti) {
    WithDType(dto, [&](auto to) {
      SoftmaxOutT<decltype(ti)::value, decltype(to)::value>(x, static_cast<std::size_t>(n), m,
                                                            inv, e, y);
    });
  });
}

void LogSoftmaxOut(int dti, const void* x, std::int64_t n, float m, float lse, int dto, void* y) {
  WithDType(dti, [&](auto ti) {
    WithDType(dto, [&](auto to) {
      LogSoftmaxOutT<decltype(ti)::value, decltype(to)::value>(x, static_cast<std::size_t>(n), m,
                                                               lse, y);
    });
  });
}

void CrossEntropyBackOut(int dti, const void* x, std::int64_t n, float m, float inv, float g,
                         float q_off, float q_on, std::int64_t t, int dto, void* out) {
  WithDType(dti, [&](auto ti) {
    WithDType(dto, [&](auto to) {
      CrossEntropyBackOutT<decltype(ti)::value, decltype(to)::value>(
          x, static_cast<std::size_t>(n), m, inv, g, q_off, q_on, t, out);
    });
  });
}

float BackDot(int dty, const void* y, int dtg, const void* dy, std::int64_t n) {
  float s = 0.0f;
  WithDType(dty, [&](auto ty) {
    WithDType(dtg, [&](auto tg) {
      s = DotT<decltype(ty)::value, decltype(tg)::value>(y, dy, static_cast<std::size_t>(n));
    });
  });
  return s;
}

void BackOut(int dty, const void* y, int dtg, const void* dy, std::int64_t n, float s, bool log,
             int dto, void* dx) {
  WithDType(dty, [&](auto ty) {
    WithDType(dtg, [&](auto tg) {
      WithDType(dto, [&](auto to) {
        BackOutT<decltype(ty)::value, decltype(tg)::value, decltype(to)::value>(
            y, dy, static_cast<std::size_t>(n), s, log, dx);
      });
    });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(RowMax);
HWY_EXPORT(ExpStats);
HWY_EXPORT(SoftmaxOut);
HWY_EXPORT(LogSoftmaxOut);
HWY_EXPORT(CrossEntropyBackOut);
HWY_EXPORT(BackDot);
HWY_EXPORT(BackOut);

namespace {
int code(DType t) { return static_cast<int>(t); }
}  // namespace

float simd_row_max(DType dt, const void* x, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(RowMax)(code(dt), x, n);
}
void simd_exp_stats(DType dt, const void* x, std::int64_t n, float m, float* sum_exp,
                    float* sum_shifted, float* e_out) {
  HWY_DYNAMIC_DISPATCH(ExpStats)(code(dt), x, n, m, sum_exp, sum_shifted, e_out);
}
void simd_softmax_out(DType dti, const void* x, std::int64_t n, float m, float inv,
                      const float* e, DType dto, void* y) {
  HWY_DYNAMIC_DISPATCH(SoftmaxOut)(code(dti), x, n, m, inv, e, code(dto), y);
}
void simd_log_softmax_out(DType dti, const void* x, std::int64_t n, float m, float lse, DType dto,
                          void* y) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxOut)(code(dti), x, n, m, lse, code(dto), y);
}
void simd_cross_entropy_back_out(DType dti, const void* x, std::int64_t n, float m, float inv,
                                 float g, float q_off, float q_on, std::int64_t t, DType dto,
                                 void* out) {
  HWY_DYNAMIC_DISPATCH(CrossEntropyBackOut)(code(dti), x, n, m, inv, g, q_off, q_on, t,
                                            code(dto), out);
}
float simd_back_dot(DType dty, const void* y, DType dtg, const void* dy, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BackDot)(code(dty), y, code(dtg), dy, n);
}
void simd_back_out(DType dty, const void* y, DType dtg, const void* dy, std::int64_t n, float s,
                   bool log, DType dto, void* dx) {
  HWY_DYNAMIC_DISPATCH(BackOut)(code(dty), y, code(dtg), dy, n, s, log, code(dto), dx);
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
