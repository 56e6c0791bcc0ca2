// Batch norm + ReLU + max pooling over channels-last window rows, written once over Highway
// for every target. Lanes run across a pixel's channels, so each window step is one load per
// block of channels. The forward computes each value as the unfused kernels do: ColsAffineT's
// (x - mean) * scale + shift, rounded to the storage dtype, then ReLU (what batch_norm_relu
// stores), compared in row-major window order with max pooling's rule (Take in pool_simd.cpp:
// the first maximum, a NaN winning once), and keeps the winner's window index as a byte. The
// backward's gradient at that index is 0 + dy (max_pool2d_backward's) through the ReLU of the
// pooled value, and dx is ColsBwdDxT's formula. So the forward's bits are the unfused ops' bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/norm_pool_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// Plain headers: compiled once (include guards), outside the per-target namespace.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/norm_pool_simd.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace {

using norm_pool_simd::WindowRow;

// (Vectors are locals and reference parameters only, never struct members: SVE's are sizeless.)

/// The value batch_norm_relu stores for x: (x - mean) * scale + shift rounded to T, then ReLU.
template <class T, class DF>
HWY_INLINE hn::Vec<DF> ReluValue(DF df, hn::Vec<DF> x, hn::Vec<DF> mean, hn::Vec<DF> scale,
                                 hn::Vec<DF> shift) {
  const auto v = RoundTo<T>(df, hn::MulAdd(hn::Sub(x, mean), scale, shift));
  return hn::IfThenZeroElse(hn::Le(v, hn::Zero(df)), v);
}

/// The order max pooling compares ReLU'd values in, as integers: their bits (every value is
/// +0 or above, or NaN), with every NaN equal and above +inf. "Strictly greater key" is then
/// Takes' rule in pool_simd.cpp (the first maximum wins; the first NaN wins once), and the
/// running key is a plain integer maximum: a one-cycle dependency from pixel to pixel instead
/// of a NaN test of the best so far, a compare and a blend (perf: that chain was the forward's
/// bottleneck).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> PoolKey(DF /*df*/, hn::Vec<DF> v) {
  const hn::RebindToSigned<DF> di;
  return hn::Min(hn::And(hn::BitCast(di, v), hn::Set(di, 0x7fffffff)), hn::Set(di, 0x7f800001));
}

/// The window size: kK when it is known at compile time (the common 2 x 2, its loops unrolled),
/// else the row's.
template <std::size_t kK>
HWY_INLINE std::size_t KernelOf(const WindowRow& r) {
  return kK != 0 ? kK : static_cast<std::size_t>(r.kernel);
}

/// Window ox's maximum over channels [j, j + n) into best, with its pixel's ordinal (row-major
/// within the window) in index.
template <class T, std::size_t kK, class DF>
HWY_INLINE void MaxOfWindow(DF df, const WindowRow& r, std::size_t ox, std::size_t j,
                            std::size_t n, hn::Vec<DF> mean, hn::Vec<DF> scale, hn::Vec<DF> shift,
                            hn::Vec<DF>& best, hn::Vec<hn::RebindToSigned<DF>>& index) {
  const hn::RebindToSigned<DF> di;
  const std::size_t k = KernelOf<kK>(r), w = static_cast<std::size_t>(r.w),
                    c = static_cast<std::size_t>(r.c);
  const T* first = static_cast<const T*>(r.x) + ox * k * c + j;
  best = ReluValue<T>(df, LoadF32N(df, first, n), mean, scale, shift);
  auto key = PoolKey(df, best);
  index = hn::Zero(di);
  for (std::size_t iy = 0; iy < k; ++iy) {
    for (std::size_t ix = iy == 0 ? 1 : 0; ix < k; ++ix) {
      const auto v = ReluValue<T>(df, LoadF32N(df, first + (iy * w + ix) * c, n), mean, scale, shift);
      const auto vkey = PoolKey(df, v);
      const auto t = hn::Gt(vkey, key);
      key = hn::Max(key, vkey);
      best = hn::IfThenElse(hn::RebindMask(df, t), v, best);
      index = hn::IfThenElse(t, hn::Set(di, static_cast<std::int32_t>(iy * k + ix)), index);
    }
  }
}

/// The first n window indices of a byte row, as int32 lanes, and back. A full vector goes
/// straight to memory: bytes copied into a stack buffer and loaded as a vector stall on store
/// forwarding (perf: a third of the dx pass).
template <class DI>
HWY_INLINE hn::Vec<DI> LoadIndexN(DI di, const std::uint8_t* p, std::size_t n) {
  const hn::Rebind<std::uint8_t, DI> d8;
  if (n == hn::Lanes(di)) return hn::PromoteTo(di, hn::LoadU(d8, p));
  std::uint8_t buf[kMaxF32Lanes] = {};
  std::memcpy(buf, p, n);
  return hn::PromoteTo(di, hn::LoadU(d8, buf));
}
template <class DI>
HWY_INLINE void StoreIndexN(DI di, hn::Vec<DI> v, std::uint8_t* p, std::size_t n) {
  const hn::Rebind<std::uint8_t, DI> d8;
  if (n == hn::Lanes(di)) return hn::StoreU(hn::DemoteTo(d8, v), d8, p);
  std::uint8_t buf[kMaxF32Lanes];
  hn::StoreU(hn::DemoteTo(d8, v), d8, buf);
  std::memcpy(p, buf, n);
}

/// The gradient batch norm sees at the argmax: 0 + dy (as the pool's backward writes it) where
/// the pooled maximum is > 0 (the ReLU), else +0.
template <class DF>
HWY_INLINE hn::Vec<DF> ArgmaxGrad(DF df, hn::Vec<DF> y, hn::Vec<DF> dy) {
  return hn::IfThenElseZero(hn::Gt(y, hn::Zero(df)), hn::Add(hn::Zero(df), dy));
}

/// Window ox's gradient at its argmax (channels [j, j + n), at = ox * c + j in the pooled row)
/// and that argmax's window index.
template <class DF, class T>
HWY_INLINE void WindowGradient(DF df, const T* y, const std::uint8_t* argmax, const T* dy,
                               std::size_t at, std::size_t n, hn::Vec<DF>& g,
                               hn::Vec<hn::RebindToSigned<DF>>& index) {
  g = ArgmaxGrad(df, LoadF32N(df, y + at, n), LoadF32N(df, dy + at, n));
  index = LoadIndexN(hn::RebindToSigned<DF>(), argmax + at, n);
}

/// The gradient at window pixel q (row-major): g where q is the argmax, +0 elsewhere.
template <class DF>
HWY_INLINE hn::Vec<DF> GradAt(DF df, hn::Vec<DF> g, hn::Vec<hn::RebindToSigned<DF>> index,
                              std::size_t q) {
  const hn::RebindToSigned<DF> di;
  return hn::IfThenElseZero(
      hn::RebindMask(df, hn::Eq(index, hn::Set(di, static_cast<std::int32_t>(q)))), g);
}

template <class T, std::size_t kK>
void ForwardRowT(const WindowRow& r, T* y, std::uint8_t* argmax) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const std::size_t N = hn::Lanes(df), c = static_cast<std::size_t>(r.c);
  const std::size_t wo = static_cast<std::size_t>(r.w) / KernelOf<kK>(r);
  for (std::size_t j = 0; j < c; j += N) {
    const std::size_t n = std::min(N, c - j);
    const auto mean = LoadF32N(df, r.mean + j, n), scale = LoadF32N(df, r.scale + j, n),
               shift = LoadF32N(df, r.shift + j, n);
    auto best = hn::Zero(df);
    auto index = hn::Zero(di);
    for (std::size_t ox = 0; ox < wo; ++ox) {
      MaxOfWindow<T, kK>(df, r, ox, j, n, mean, scale, shift, best, index);
      StoreF32N(df, best, y + ox * c + j, n);
      if (argmax != nullptr) StoreIndexN(di, index, argmax + ox * c + j, n);
    }
  }
}

template <class T, std::size_t kK>
void BackwardSumsRowT(const WindowRow& r, const T* y, const std::uint8_t* argmax, const T* dy,
                      float* acc_g, float* acc_gx) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const std::size_t N = hn::Lanes(df), c = static_cast<std::size_t>(r.c);
  const std::size_t k = KernelOf<kK>(r), w = static_cast<std::size_t>(r.w);
  const std::size_t wo = w / k;
  const T* x = static_cast<const T*>(r.x);
  for (std::size_t j = 0; j < c; j += N) {
    const std::size_t n = std::min(N, c - j);
    const auto mean = LoadF32N(df, r.mean + j, n);
    auto sg = LoadF32N(df, acc_g + j, n), sgx = LoadF32N(df, acc_gx + j, n);
    auto g = hn::Zero(df);
    auto index = hn::Zero(di);
    // Every pixel adds g * (x - mean), +0 * (x - mean) off the argmax: an infinite x there
    // makes the sum NaN, as in the unfused backward (and PyTorch's), instead of vanishing.
    const auto term = [&](std::size_t ox, std::size_t iy, std::size_t ix, hn::Vec<decltype(df)> acc) {
      const auto xk = LoadF32N(df, x + (iy * w + ox * k + ix) * c + j, n);
      return hn::MulAdd(GradAt(df, g, index, iy * k + ix), hn::Sub(xk, mean), acc);
    };
    if constexpr (kK == 2) {
      // One accumulator per window pixel: four independent FMA chains instead of one chain of
      // four FMAs per window (its latency bounded the pass).
      auto s0 = hn::Zero(df), s1 = s0, s2 = s0, s3 = s0;
      for (std::size_t ox = 0; ox < wo; ++ox) {
        WindowGradient(df, y, argmax, dy, ox * c + j, n, g, index);
        sg = hn::Add(sg, g);
        s0 = term(ox, 0, 0, s0), s1 = term(ox, 0, 1, s1), s2 = term(ox, 1, 0, s2), s3 = term(ox, 1, 1, s3);
      }
      sgx = hn::Add(sgx, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
    } else {
      for (std::size_t ox = 0; ox < wo; ++ox) {
        WindowGradient(df, y, argmax, dy, ox * c + j, n, g, index);
        sg = hn::Add(sg, g);
        for (std::size_t iy = 0; iy < k; ++iy) {
          for (std::size_t ix = 0; ix < k; ++ix) sgx = term(ox, iy, ix, sgx);
        }
      }
    }
    StoreF32N(df, sg, acc_g + j, n);
    StoreF32N(df, sgx, acc_gx + j, n);
  }
}

template <class T>
void BackwardDxRowT(const WindowRow& r, const T* y, const std::uint8_t* argmax, const T* dy,
                    const float* k1, const float* k2, const float* k3, T* dx) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const std::size_t N = hn::Lanes(df), c = static_cast<std::size_t>(r.c);
  const auto k = static_cast<std::size_t>(r.kernel), w = static_cast<std::size_t>(r.w);
  const std::size_t wo = w / k;
  const T* x = static_cast<const T*>(r.x);
  for (std::size_t j = 0; j < c; j += N) {
    const std::size_t n = std::min(N, c - j);
    const auto mean = LoadF32N(df, r.mean + j, n);
    const auto f1 = LoadF32N(df, k1 + j, n), f2 = LoadF32N(df, k2 + j, n),
               f3 = LoadF32N(df, k3 + j, n);
    auto g = hn::Zero(df);
    auto index = hn::Zero(di);
    for (std::size_t ox = 0; ox < wo; ++ox) {
      WindowGradient(df, y, argmax, dy, ox * c + j, n, g, index);
      for (std::size_t iy = 0; iy < k; ++iy) {
        for (std::size_t ix = 0; ix < k; ++ix) {
          const std::size_t at = (iy * w + ox * k + ix) * c + j;
          // ColsBwdDxT's formula: g * k1 + ((x - mean) * k2 + k3).
          const auto r2 = hn::MulAdd(hn::Sub(LoadF32N(df, x + at, n), mean), f2, f3);
          StoreF32N(df, hn::MulAdd(GradAt(df, g, index, iy * k + ix), f1, r2), dx + at, n);
        }
      }
    }
  }
}

}  // namespace

void ForwardRow(const WindowRow& r, void* y, std::uint8_t* argmax) {
  WithDType(static_cast<int>(r.t), [&](auto t) {
    using T = Elem<decltype(t)>;
    if (r.kernel == 2) return ForwardRowT<T, 2>(r, static_cast<T*>(y), argmax);
    ForwardRowT<T, 0>(r, static_cast<T*>(y), argmax);
  });
}
void BackwardSumsRow(const WindowRow& r, const void* y, const std::uint8_t* argmax,
                     const void* dy, float* acc_g, float* acc_gx) {
  WithDType(static_cast<int>(r.t), [&](auto t) {
    using T = Elem<decltype(t)>;
    const auto* yt = static_cast<const T*>(y);
    const auto* dyt = static_cast<const T*>(dy);
    if (r.kernel == 2) return BackwardSumsRowT<T, 2>(r, yt, argmax, dyt, acc_g, acc_gx);
    BackwardSumsRowT<T, 0>(r, yt, argmax, dyt, acc_g, acc_gx);
  });
}
void BackwardDxRow(const WindowRow& r, const void* y, const std::uint8_t* argmax, const void* dy,
                   const float* k1, const float* k2, const float* k3, void* dx) {
  WithDType(static_cast<int>(r.t), [&](auto t) {
    using T = Elem<decltype(t)>;
    BackwardDxRowT<T>(r, static_cast<const T*>(y), argmax, static_cast<const T*>(dy), k1, k2, k3,
                      static_cast<T*>(dx));
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {
HWY_EXPORT(ForwardRow);
HWY_EXPORT(BackwardSumsRow);
HWY_EXPORT(BackwardDxRow);

namespace norm_pool_simd {
void forward_row(const WindowRow& r, void* y_row, std::uint8_t* argmax_row) {
  HWY_DYNAMIC_DISPATCH(ForwardRow)(r, y_row, argmax_row);
}
void backward_sums_row(const WindowRow& r, const void* y_row, const std::uint8_t* argmax_row,
                       const void* dy_row, float* acc_g, float* acc_gx) {
  HWY_DYNAMIC_DISPATCH(BackwardSumsRow)(r, y_row, argmax_row, dy_row, acc_g, acc_gx);
}
void backward_dx_row(const WindowRow& r, const void* y_row, const std::uint8_t* argmax_row,
                     const void* dy_row, const float* k1, const float* k2, const float* k3,
                     void* dx_rows) {
  HWY_DYNAMIC_DISPATCH(BackwardDxRow)(r, y_row, argmax_row, dy_row, k1, k2, k3, dx_rows);
}
}  // namespace norm_pool_simd
}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
