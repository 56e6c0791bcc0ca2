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
// ---- one run of a row (at most kRun values for the f32 sums) ----

constexpr auto kRunLen = static_cast<std::size_t>(norm_simd::kRun);

template <class T>
float RunSumT(const T* x, std::size_t len) {
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

template <class T>
float RunSqDevSumT(const T* x, std::size_t len, float mean) {
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

/// The gradient batch norm works on: dy, or with kRelu dy through the fused ReLU whose output
/// is y (norm_math::batch_norm_relu_grad: dy where y > 0, else +0). The first n lanes.
template <bool kRelu, class DF, class TD>
HWY_INLINE hn::Vec<DF> LoadGradN(DF df, const TD* dy, const TD* y, std::size_t n) {
  const auto g = LoadF32N(df, dy, n);
  if constexpr (!kRelu) return g;
  else return hn::IfThenElseZero(hn::Gt(LoadF32N(df, y, n), hn::Zero(df)), g);
}

template <bool kRelu, class TX, class TD>
void RunBwdSumsT(const TX* x, const TD* dy, const TD* y, std::size_t len, float mean,
                 float* sum_dy, float* sum_dy_xmu) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean);
  auto s0 = hn::Zero(df), s1 = s0, p0 = s0, p1 = s0;
  std::size_t i = 0;
  for (; i + 2 * N <= len; i += 2 * N) {
    const auto g0 = LoadGradN<kRelu>(df, dy + i, y + i, N);
    const auto g1 = LoadGradN<kRelu>(df, dy + i + N, y + i + N, N);
    s0 = hn::Add(s0, g0);
    s1 = hn::Add(s1, g1);
    p0 = hn::MulAdd(g0, hn::Sub(LoadF32(df, x + i), m), p0);
    p1 = hn::MulAdd(g1, hn::Sub(LoadF32(df, x + i + N), m), p1);
  }
  for (; i < len; i += N) {
    const std::size_t k = std::min(N, len - i);
    const auto g = LoadGradN<kRelu>(df, dy + i, y + i, k);
    s0 = hn::Add(s0, g);
    const auto xm = hn::IfThenElseZero(hn::FirstN(df, k), hn::Sub(LoadF32N(df, x + i, k), m));
    p0 = hn::MulAdd(g, xm, p0);
  }
  *sum_dy = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
  *sum_dy_xmu = hn::GetLane(hn::SumOfLanes(df, hn::Add(p0, p1)));
}

template <bool kRelu, class TX, class TY>
void RunAffineT(const TX* x, std::size_t len, float mean, float scale, float shift, TY* y) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), k = hn::Set(df, scale), b = hn::Set(df, shift);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    auto v = hn::MulAdd(hn::Sub(LoadF32N(df, x + i, n), m), k, b);
    if constexpr (kRelu) {
      // relu of the stored value (math::relu::forward: NaN stays, -0 and below become +0); the
      // result is exact in TY, so the store below rounds nothing more.
      v = RoundTo<TY>(df, v);
      v = hn::IfThenZeroElse(hn::Le(v, hn::Zero(df)), v);
    }
    StoreF32N(df, v, y + i, n);
  }
}

template <bool kRelu, class TX, class TD, class TO>
void RunBwdDxT(const TX* x, const TD* dy, const TD* y, std::size_t len, float mean, float k1,
               float k2, float k3, TO* dx) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const auto m = hn::Set(df, mean), v1 = hn::Set(df, k1), v2 = hn::Set(df, k2), v3 = hn::Set(df, k3);
  for (std::size_t i = 0; i < len; i += N) {
    const std::size_t n = std::min(N, len - i);
    const auto r = hn::MulAdd(hn::Sub(LoadF32N(df, x + i, n), m), v2, v3);
    StoreF32N(df, hn::MulAdd(LoadGradN<kRelu>(df, dy + i, y + i, n), v1, r), dx + i, n);
  }
}

// ---- sets of strided rows: one call per channel (or per layer-norm row) ----

/// How much of each stream the rows_* functions ask for ahead of the row they work on: enough
/// to cover a DRAM access at the rate one core streams (a row of 196 bf16 values is read in
/// tens of nanoseconds, a miss takes about a hundred).
constexpr std::size_t kAheadBytes = 4096;

/// Asks for the start of a row, at most kAheadBytes of it: past that the row is one long
/// stream, which the hardware prefetcher follows, and asking for all of a plane of 224 x 224
/// values at once would only push it out of L1 before it is read.
template <int kWrite, class T>
HWY_INLINE void PrefetchRun(const T* p, std::size_t len) {
  const char* c = reinterpret_cast<const char*>(p);
  const std::size_t bytes = std::min(len * sizeof(T), kAheadBytes);
  for (std::size_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, kWrite, 3);
}

/// Calls body(r) for each row r in order, having asked for row r + ahead (prefetch(row)) first,
/// and for the first `ahead` rows before row 0. A single row (layer norm) prefetches nothing.
template <class Prefetch, class Body>
HWY_INLINE void ForRows(std::size_t rows, std::size_t row_bytes, const Prefetch& prefetch,
                        const Body& body) {
  const std::size_t ahead = rows > 1 ? std::max<std::size_t>(1, (kAheadBytes + row_bytes - 1) /
                                                                    std::max<std::size_t>(1, row_bytes))
                                     : 0;
  for (std::size_t r = 0; r < std::min(ahead, rows); ++r) prefetch(r);
  for (std::size_t r = 0; r < rows; ++r) {
    if (ahead != 0 && r + ahead < rows) prefetch(r + ahead);
    body(r);
  }
}

template <class T>
const T* RowOf(const void* p, std::int64_t stride, std::size_t r) {
  return static_cast<const T*>(p) + static_cast<std::ptrdiff_t>(r) * stride;
}
template <class T>
T* RowOf(void* p, std::int64_t stride, std::size_t r) {
  return static_cast<T*>(p) + static_cast<std::ptrdiff_t>(r) * stride;
}

/// Calls f with std::integral_constant<bool, b>.
template <class F>
HWY_INLINE void WithBool(bool b, F&& f) {
  if (b) f(std::true_type{});
  else f(std::false_type{});
}

/// Sum over the rows, in row order, of each row's sum in double of run_sum(run, length) over its
/// runs of at most kRun values: the f32 sums never cover more than kRun values.
template <class TX, class RunSum>
double RowsOfRunSums(const void* x, std::int64_t stride, std::int64_t rows, std::int64_t len,
                     const RunSum& run_sum) {
  double total = 0.0;
  const auto n = static_cast<std::size_t>(len);
  ForRows(static_cast<std::size_t>(rows), n * sizeof(TX),
          [&](std::size_t r) { PrefetchRun<0>(RowOf<TX>(x, stride, r), n); },
          [&](std::size_t r) {
            const TX* row = RowOf<TX>(x, stride, r);
            double s = 0.0;
            for (std::size_t i = 0; i < n; i += kRunLen) s += run_sum(row + i, std::min(kRunLen, n - i));
            total += s;
          });
  return total;
}

double RowsSum(int tx, const void* x, std::int64_t stride, std::int64_t rows, std::int64_t len) {
  double total = 0.0;
  WithDType(tx, [&](auto t) {
    using TX = Elem<decltype(t)>;
    total = RowsOfRunSums<TX>(x, stride, rows, len,
                              [](const TX* run, std::size_t n) { return RunSumT(run, n); });
  });
  return total;
}

double RowsSqDevSum(int tx, const void* x, std::int64_t stride, std::int64_t rows, std::int64_t len,
                    float mean) {
  double total = 0.0;
  WithDType(tx, [&](auto t) {
    using TX = Elem<decltype(t)>;
    total = RowsOfRunSums<TX>(x, stride, rows, len,
                              [mean](const TX* run, std::size_t n) { return RunSqDevSumT(run, n, mean); });
  });
  return total;
}

void RowsBwdSums(int tx, int tdy, const void* x, std::int64_t x_stride, const void* dy,
                 std::int64_t dy_stride, const void* relu_y, std::int64_t rows, std::int64_t len,
                 float mean, double* sum_dy, double* sum_dy_xmu) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      WithBool(relu_y != nullptr, [&](auto relu) {
        using TX = Elem<decltype(a)>;
        using TD = Elem<decltype(b)>;
        const auto n = static_cast<std::size_t>(len);
        double s_dy = *sum_dy, s_dy_xmu = *sum_dy_xmu;
        ForRows(static_cast<std::size_t>(rows), n * sizeof(TX),
                [&](std::size_t r) {
                  PrefetchRun<0>(RowOf<TX>(x, x_stride, r), n);
                  PrefetchRun<0>(RowOf<TD>(dy, dy_stride, r), n);
                  if constexpr (decltype(relu)::value) PrefetchRun<0>(RowOf<TD>(relu_y, dy_stride, r), n);
                },
                [&](std::size_t r) {
                  const TX* xr = RowOf<TX>(x, x_stride, r);
                  const TD* gr = RowOf<TD>(dy, dy_stride, r);
                  const TD* yr = decltype(relu)::value ? RowOf<TD>(relu_y, dy_stride, r) : nullptr;
                  for (std::size_t i = 0; i < n; i += kRunLen) {
                    float s = 0.0f, p = 0.0f;
                    RunBwdSumsT<decltype(relu)::value>(xr + i, gr + i, yr == nullptr ? nullptr : yr + i,
                                                       std::min(kRunLen, n - i), mean, &s, &p);
                    s_dy += s;
                    s_dy_xmu += p;
                  }
                });
        *sum_dy = s_dy;
        *sum_dy_xmu = s_dy_xmu;
      });
    });
  });
}

void RowsAffine(int tx, int ty, const void* x, std::int64_t x_stride, std::int64_t rows,
                std::int64_t len, float mean, float scale, float shift, bool relu, void* y,
                std::int64_t y_stride) {
  WithDType(tx, [&](auto a) {
    WithDType(ty, [&](auto b) {
      WithBool(relu, [&](auto kRelu) {
        using TX = Elem<decltype(a)>;
        using TY = Elem<decltype(b)>;
        const auto n = static_cast<std::size_t>(len);
        ForRows(static_cast<std::size_t>(rows), n * sizeof(TX),
                [&](std::size_t r) {
                  PrefetchRun<0>(RowOf<TX>(x, x_stride, r), n);
                  PrefetchRun<1>(RowOf<TY>(y, y_stride, r), n);
                },
                [&](std::size_t r) {
                  RunAffineT<decltype(kRelu)::value>(RowOf<TX>(x, x_stride, r), n, mean, scale, shift,
                                                     RowOf<TY>(y, y_stride, r));
                });
      });
    });
  });
}

void RowsBwdDx(int tx, int tdy, int tdx, const void* x, std::int64_t x_stride, const void* dy,
               std::int64_t dy_stride, const void* relu_y, std::int64_t rows, std::int64_t len,
               float mean, float k1, float k2, float k3, void* dx, std::int64_t dx_stride) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      WithDType(tdx, [&](auto c) {
        WithBool(relu_y != nullptr, [&](auto relu) {
          using TX = Elem<decltype(a)>;
          using TD = Elem<decltype(b)>;
          using TO = Elem<decltype(c)>;
          const auto n = static_cast<std::size_t>(len);
          ForRows(static_cast<std::size_t>(rows), n * sizeof(TX),
                  [&](std::size_t r) {
                    PrefetchRun<0>(RowOf<TX>(x, x_stride, r), n);
                    PrefetchRun<0>(RowOf<TD>(dy, dy_stride, r), n);
                    if constexpr (decltype(relu)::value) PrefetchRun<0>(RowOf<TD>(relu_y, dy_stride, r), n);
                    PrefetchRun<1>(RowOf<TO>(dx, dx_stride, r), n);
                  },
                  [&](std::size_t r) {
                    RunBwdDxT<decltype(relu)::value>(
                        RowOf<TX>(x, x_stride, r), RowOf<TD>(dy, dy_stride, r),
                        decltype(relu)::value ? RowOf<TD>(relu_y, dy_stride, r) : nullptr, n, mean,
                        k1, k2, k3, RowOf<TO>(dx, dx_stride, r));
                  });
        });
      });
    });
  });
}

// ---- per-column kernels (batch norm of [N, C] and short planes) ----

// Each takes `rows` rows of len values, row r at r * stride: one dispatched call per block.

// The accumulating column kernels keep up to kColVecs vectors of columns in registers while the
// block's rows stream past: each column still adds its rows in order (the sums of one row at a
// time, bit for bit), but without storing and reloading every accumulator once per row, a
// store-to-load chain that bound channels-last rows of 32 or 64 values to about ten cycles each.
constexpr std::size_t kColVecs = 4;

// Calls body(i, n0, n1, n2, n3) for each group of up to kColVecs vectors of columns starting at
// i, where nk (0 when absent) is the number of columns of the group's k-th vector.
template <class Body>
HWY_INLINE void OverColumnGroups(std::size_t len, const Body& body) {
  const std::size_t N = hn::Lanes(hn::ScalableTag<float>());
  const auto count = [&](std::size_t at) { return at < len ? std::min(N, len - at) : std::size_t{0}; };
  for (std::size_t i = 0; i < len; i += kColVecs * N) {
    body(i, count(i), count(i + N), count(i + 2 * N), count(i + 3 * N));
  }
}

/// Columns [at, at + n) of p as one vector (n <= Lanes; 0 for a group's absent vector: zeros).
template <class DF>
HWY_INLINE hn::Vec<DF> ColumnVec(DF df, const float* p, std::size_t at, std::size_t n) {
  return n != 0 ? LoadF32N(df, p + at, n) : hn::Zero(df);
}

// acc[j] += x[r, j], or (x[r, j] - mean[j])^2 when mean is not null, rows in order.
template <class T>
void ColsAccT(const T* x, std::size_t rows, std::size_t stride, std::size_t len, const float* mean,
              float* acc) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  OverColumnGroups(len, [&](std::size_t i, std::size_t n0, std::size_t n1, std::size_t n2,
                            std::size_t n3) {
    const auto term = [&](const T* row, std::size_t at, std::size_t n) {
      auto v = LoadF32N(df, row + at, n);
      if (mean == nullptr) return v;
      const auto d = hn::Sub(v, LoadF32N(df, mean + at, n));
      return hn::Mul(d, d);
    };
    auto a0 = ColumnVec(df, acc, i, n0), a1 = ColumnVec(df, acc, i + N, n1);
    auto a2 = ColumnVec(df, acc, i + 2 * N, n2), a3 = ColumnVec(df, acc, i + 3 * N, n3);
    const T* row = x;
    for (std::size_t r = 0; r < rows; ++r, row += stride) {
      a0 = hn::Add(a0, term(row, i, n0));
      if (n1 != 0) a1 = hn::Add(a1, term(row, i + N, n1));
      if (n2 != 0) a2 = hn::Add(a2, term(row, i + 2 * N, n2));
      if (n3 != 0) a3 = hn::Add(a3, term(row, i + 3 * N, n3));
    }
    StoreF32N(df, a0, acc + i, n0);
    if (n1 != 0) StoreF32N(df, a1, acc + i + N, n1);
    if (n2 != 0) StoreF32N(df, a2, acc + i + 2 * N, n2);
    if (n3 != 0) StoreF32N(df, a3, acc + i + 3 * N, n3);
  });
}

void ColsAcc(int tx, const void* x, std::int64_t rows, std::int64_t stride, std::int64_t len,
             const float* mean, float* acc) {
  WithDType(tx, [&](auto t) {
    ColsAccT(static_cast<const Elem<decltype(t)>*>(x), static_cast<std::size_t>(rows),
             static_cast<std::size_t>(stride), static_cast<std::size_t>(len), mean, acc);
  });
}

// acc_dy[j] += g[r, j]; acc_dy_xmu[j] += g[r, j] * (x[r, j] - mean[j]), rows in order; g is
// dy, or with kRelu dy through the ReLU whose output is y (LoadGradN).
template <bool kRelu, class TX, class TD>
void ColsBwdAccT(const TX* x, const TD* dy, const TD* y, std::size_t rows, std::size_t stride,
                 std::size_t len, const float* mean, float* acc_dy, float* acc_dy_xmu) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  OverColumnGroups(len, [&](std::size_t i, std::size_t n0, std::size_t n1, std::size_t n2,
                            std::size_t n3) {
    using V = hn::Vec<decltype(df)>;
    const auto load = [&](const float* p, std::size_t at, std::size_t n) {
      return ColumnVec(df, p, at, n);
    };
    const auto add = [&](const TX* xr, const TD* gr, const TD* yr, std::size_t at, std::size_t n,
                         V& s, V& sx) {
      const auto g = LoadGradN<kRelu>(df, gr + at, kRelu ? yr + at : nullptr, n);
      const auto xm = hn::Sub(LoadF32N(df, xr + at, n), LoadF32N(df, mean + at, n));
      s = hn::Add(s, g);
      sx = hn::MulAdd(g, xm, sx);
    };
    auto s0 = load(acc_dy, i, n0), s1 = load(acc_dy, i + N, n1), s2 = load(acc_dy, i + 2 * N, n2),
         s3 = load(acc_dy, i + 3 * N, n3);
    auto t0 = load(acc_dy_xmu, i, n0), t1 = load(acc_dy_xmu, i + N, n1),
         t2 = load(acc_dy_xmu, i + 2 * N, n2), t3 = load(acc_dy_xmu, i + 3 * N, n3);
    const TX* xr = x;
    const TD* gr = dy;
    const TD* yr = y;
    for (std::size_t r = 0; r < rows; ++r, xr += stride, gr += stride, yr += kRelu ? stride : 0) {
      add(xr, gr, yr, i, n0, s0, t0);
      if (n1 != 0) add(xr, gr, yr, i + N, n1, s1, t1);
      if (n2 != 0) add(xr, gr, yr, i + 2 * N, n2, s2, t2);
      if (n3 != 0) add(xr, gr, yr, i + 3 * N, n3, s3, t3);
    }
    const auto store = [&](V v, float* p, std::size_t at, std::size_t n) {
      if (n != 0) StoreF32N(df, v, p + at, n);
    };
    store(s0, acc_dy, i, n0);
    store(s1, acc_dy, i + N, n1);
    store(s2, acc_dy, i + 2 * N, n2);
    store(s3, acc_dy, i + 3 * N, n3);
    store(t0, acc_dy_xmu, i, n0);
    store(t1, acc_dy_xmu, i + N, n1);
    store(t2, acc_dy_xmu, i + 2 * N, n2);
    store(t3, acc_dy_xmu, i + 3 * N, n3);
  });
}

void ColsBwdAcc(int tx, int tdy, const void* x, const void* dy, const void* relu_y,
                std::int64_t rows, std::int64_t stride, std::int64_t len, const float* mean,
                float* acc_dy, float* acc_dy_xmu) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      WithBool(relu_y != nullptr, [&](auto relu) {
        using TD = Elem<decltype(b)>;
        ColsBwdAccT<decltype(relu)::value>(
            static_cast<const Elem<decltype(a)>*>(x), static_cast<const TD*>(dy),
            static_cast<const TD*>(relu_y), static_cast<std::size_t>(rows),
            static_cast<std::size_t>(stride), static_cast<std::size_t>(len), mean, acc_dy,
            acc_dy_xmu);
      });
    });
  });
}

// y[r, j] = (x[r, j] - mean[j]) * scale[j] + shift[j], with kRelu then ReLU of the rounded value
// (as RunAffineT); the per-column factors stay in registers while the rows stream past (a group
// of up to kColVecs vectors at a time).
template <bool kRelu, class TX, class TY>
void ColsAffineT(const TX* x, std::size_t rows, std::size_t stride, std::size_t len,
                 const float* mean, const float* scale, const float* shift, TY* y) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  OverColumnGroups(len, [&](std::size_t i, std::size_t n0, std::size_t n1, std::size_t n2,
                            std::size_t n3) {
    const auto param = [&](const float* p, std::size_t at, std::size_t n) {
      return ColumnVec(df, p, at, n);
    };
    const V m0 = param(mean, i, n0), m1 = param(mean, i + N, n1), m2 = param(mean, i + 2 * N, n2),
            m3 = param(mean, i + 3 * N, n3);
    const V s0 = param(scale, i, n0), s1 = param(scale, i + N, n1),
            s2 = param(scale, i + 2 * N, n2), s3 = param(scale, i + 3 * N, n3);
    const V h0 = param(shift, i, n0), h1 = param(shift, i + N, n1),
            h2 = param(shift, i + 2 * N, n2), h3 = param(shift, i + 3 * N, n3);
    const auto one = [&](const TX* xr, TY* yr, std::size_t at, std::size_t n, V m, V sc, V sh) {
      auto v = hn::MulAdd(hn::Sub(LoadF32N(df, xr + at, n), m), sc, sh);
      if constexpr (kRelu) v = hn::IfThenZeroElse(hn::Le(RoundTo<TY>(df, v), hn::Zero(df)), RoundTo<TY>(df, v));
      StoreF32N(df, v, yr + at, n);
    };
    const TX* xr = x;
    TY* yr = y;
    for (std::size_t r = 0; r < rows; ++r, xr += stride, yr += stride) {
      one(xr, yr, i, n0, m0, s0, h0);
      if (n1 != 0) one(xr, yr, i + N, n1, m1, s1, h1);
      if (n2 != 0) one(xr, yr, i + 2 * N, n2, m2, s2, h2);
      if (n3 != 0) one(xr, yr, i + 3 * N, n3, m3, s3, h3);
    }
  });
}

void ColsAffine(int tx, int ty, const void* x, std::int64_t rows, std::int64_t stride,
                std::int64_t len, const float* mean, const float* scale, const float* shift,
                bool relu, void* y) {
  WithDType(tx, [&](auto a) {
    WithDType(ty, [&](auto b) {
      WithBool(relu, [&](auto kRelu) {
        ColsAffineT<decltype(kRelu)::value>(
            static_cast<const Elem<decltype(a)>*>(x), static_cast<std::size_t>(rows),
            static_cast<std::size_t>(stride), static_cast<std::size_t>(len), mean, scale, shift,
            static_cast<Elem<decltype(b)>*>(y));
      });
    });
  });
}

// dx[r, j] = g[r, j] * k1[j] + ((x[r, j] - mean[j]) * k2[j] + k3[j]), g as in ColsBwdAccT, the
// factors in registers as in ColsAffineT.
template <bool kRelu, class TX, class TD, class TO>
void ColsBwdDxT(const TX* x, const TD* dy, const TD* y, std::size_t rows, std::size_t stride,
                std::size_t len, const float* mean, const float* k1, const float* k2,
                const float* k3, TO* dx) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  OverColumnGroups(len, [&](std::size_t i, std::size_t n0, std::size_t n1, std::size_t n2,
                            std::size_t n3) {
    const auto param = [&](const float* p, std::size_t at, std::size_t n) {
      return ColumnVec(df, p, at, n);
    };
    const V m0 = param(mean, i, n0), m1 = param(mean, i + N, n1), m2 = param(mean, i + 2 * N, n2),
            m3 = param(mean, i + 3 * N, n3);
    const V a0 = param(k1, i, n0), a1 = param(k1, i + N, n1), a2 = param(k1, i + 2 * N, n2),
            a3 = param(k1, i + 3 * N, n3);
    const V b0 = param(k2, i, n0), b1 = param(k2, i + N, n1), b2 = param(k2, i + 2 * N, n2),
            b3 = param(k2, i + 3 * N, n3);
    const V c0 = param(k3, i, n0), c1 = param(k3, i + N, n1), c2 = param(k3, i + 2 * N, n2),
            c3 = param(k3, i + 3 * N, n3);
    const auto one = [&](const TX* xr, const TD* gr, const TD* yr, TO* dxr, std::size_t at,
                         std::size_t n, V m, V f1, V f2, V f3) {
      const auto r2 = hn::MulAdd(hn::Sub(LoadF32N(df, xr + at, n), m), f2, f3);
      const auto g = LoadGradN<kRelu>(df, gr + at, kRelu ? yr + at : nullptr, n);
      StoreF32N(df, hn::MulAdd(g, f1, r2), dxr + at, n);
    };
    const TX* xr = x;
    const TD* gr = dy;
    const TD* yr = y;
    TO* dxr = dx;
    for (std::size_t r = 0; r < rows;
         ++r, xr += stride, gr += stride, yr += kRelu ? stride : 0, dxr += stride) {
      one(xr, gr, yr, dxr, i, n0, m0, a0, b0, c0);
      if (n1 != 0) one(xr, gr, yr, dxr, i + N, n1, m1, a1, b1, c1);
      if (n2 != 0) one(xr, gr, yr, dxr, i + 2 * N, n2, m2, a2, b2, c2);
      if (n3 != 0) one(xr, gr, yr, dxr, i + 3 * N, n3, m3, a3, b3, c3);
    }
  });
}

void ColsBwdDx(int tx, int tdy, int tdx, const void* x, const void* dy, const void* relu_y,
               std::int64_t rows, std::int64_t stride, std::int64_t len, const float* mean,
               const float* k1, const float* k2, const float* k3, void* dx) {
  WithDType(tx, [&](auto a) {
    WithDType(tdy, [&](auto b) {
      WithDType(tdx, [&](auto c) {
        WithBool(relu_y != nullptr, [&](auto relu) {
          using TD = Elem<decltype(b)>;
          ColsBwdDxT<decltype(relu)::value>(
              static_cast<const Elem<decltype(a)>*>(x), static_cast<const TD*>(dy),
              static_cast<const TD*>(relu_y), static_cast<std::size_t>(rows),
              static_cast<std::size_t>(stride), static_cast<std::size_t>(len), mean, k1, k2, k3,
              static_cast<Elem<decltype(c)>*>(dx));
        });
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
HWY_EXPORT(RowsSum);
HWY_EXPORT(RowsSqDevSum);
HWY_EXPORT(RowsBwdSums);
HWY_EXPORT(RowsAffine);
HWY_EXPORT(RowsBwdDx);
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

double rows_sum(Rows x, RowsShape shape) {
  return HWY_DYNAMIC_DISPATCH(RowsSum)(code(x.t), x.p, x.stride, shape.rows, shape.len);
}
double rows_sq_dev_sum(Rows x, RowsShape shape, float mean) {
  return HWY_DYNAMIC_DISPATCH(RowsSqDevSum)(code(x.t), x.p, x.stride, shape.rows, shape.len, mean);
}
void rows_backward_sums(Rows x, Rows dy, const void* relu_y, RowsShape shape, float mean,
                        double* sum_dy, double* sum_dy_xmu) {
  HWY_DYNAMIC_DISPATCH(RowsBwdSums)(code(x.t), code(dy.t), x.p, x.stride, dy.p, dy.stride, relu_y,
                                    shape.rows, shape.len, mean, sum_dy, sum_dy_xmu);
}
void rows_affine(Rows x, RowsShape shape, float mean, float scale, float shift, bool relu,
                 MutableRows y) {
  HWY_DYNAMIC_DISPATCH(RowsAffine)(code(x.t), code(y.t), x.p, x.stride, shape.rows, shape.len, mean,
                                   scale, shift, relu, y.p, y.stride);
}
void rows_backward_dx(Rows x, Rows dy, const void* relu_y, RowsShape shape, float mean,
                      float k1, float k2, float k3, MutableRows dx) {
  HWY_DYNAMIC_DISPATCH(RowsBwdDx)(code(x.t), code(dy.t), code(dx.t), x.p, x.stride, dy.p, dy.stride,
                                  relu_y, shape.rows, shape.len, mean, k1, k2, k3, dx.p, dx.stride);
}
void cols_acc(const void* x, DType t, std::int64_t rows, std::int64_t stride, std::int64_t len,
              const float* mean, float* acc) {
  HWY_DYNAMIC_DISPATCH(ColsAcc)(code(t), x, rows, stride, len, mean, acc);
}
void cols_backward_acc(const void* x, DType tx, const void* dy, DType tdy, const void* relu_y,
                       std::int64_t rows, std::int64_t stride, std::int64_t len,
                       const float* mean, float* acc_dy, float* acc_dy_xmu) {
  HWY_DYNAMIC_DISPATCH(ColsBwdAcc)(code(tx), code(tdy), x, dy, relu_y, rows, stride, len, mean,
                                   acc_dy, acc_dy_xmu);
}
void cols_affine(const void* x, DType tx, std::int64_t rows, std::int64_t stride,
                 std::int64_t len, const float* mean, const float* scale, const float* shift,
                 bool relu, void* y, DType ty) {
  HWY_DYNAMIC_DISPATCH(ColsAffine)(code(tx), code(ty), x, rows, stride, len, mean, scale, shift,
                                   relu, y);
}
void cols_backward_dx(const void* x, DType tx, const void* dy, DType tdy, const void* relu_y,
                      std::int64_t rows, std::int64_t stride, std::int64_t len,
                      const float* mean, const float* k1, const float* k2, const float* k3,
                      void* dx, DType tdx) {
  HWY_DYNAMIC_DISPATCH(ColsBwdDx)(code(tx), code(tdy), code(tdx), x, dy, relu_y, rows, stride,
                                  len, mean, k1, k2, k3, dx);
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
