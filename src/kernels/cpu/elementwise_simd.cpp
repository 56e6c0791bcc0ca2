// Highway elementwise row kernels: one source compiled for every SIMD target (see
// elementwise_simd.h for the contract). Each row runs whole vectors, then the last partial
// vector through the same vector code on a zero-padded copy, so every element gets exactly the
// same operations wherever it sits (no scalar tail that could round differently, no access
// beyond the row). The exact ops are the reference's IEEE operations in its order; the
// transcendental ones come from vecmath-inl.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/vecmath-inl.h"

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elementwise_simd.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
inline const void* Offset(const void* p, int dt, std::size_t i) {
  return static_cast<const char*>(p) + i * ElemBytes(dt);
}
inline void* Offset(void* p, int dt, std::size_t i) {
  return static_cast<char*>(p) + i * ElemBytes(dt);
}

/// out[i] = f(d, in[i]) for i < n. out may be in itself (in-place ops): each vector is loaded
/// before it is stored, so no restrict qualifiers here. The partial last vector runs on a
/// zero-padded copy (LoadF32N / StoreF32N).
template <int DI, int DO, class F>
HWY_INLINE void Map1(const void* in, void* out, std::size_t n, const F& f) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + N <= n; i += N) StoreF32<DO>(d, f(d, LoadF32<DI>(d, in, i)), out, i);
  if (i < n) StoreF32N<DO>(d, f(d, LoadF32N<DI>(d, in, i, n - i)), out, i, n - i);
}

/// out[i] = f(d, a[i], b[i]) for i < n.
template <int DA, int DB, int DO, class F>
HWY_INLINE void Map2(const void* a, const void* b, void* out, std::size_t n, const F& f) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + N <= n; i += N) {
    StoreF32<DO>(d, f(d, LoadF32<DA>(d, a, i), LoadF32<DB>(d, b, i)), out, i);
  }
  if (i < n) {
    const std::size_t r = n - i;
    StoreF32N<DO>(d, f(d, LoadF32N<DA>(d, a, i, r), LoadF32N<DB>(d, b, i, r)), out, i, r);
  }
}

/// Elements per staging block when two inputs have different dtypes: both are widened to f32
/// blocks first, so only the f32 x f32 combination of each op needs to be compiled.
constexpr std::size_t kStage = 512;

/// Widens n <= kStage elements of dtype dt to f32 (exact).
inline void WidenBlock(const void* in, int dt, float* out, std::size_t n) {
  WithDType(dt, [&](auto t) { Map1<decltype(t)::value, kF32>(in, out, n, [](DF, VF x) { return x; }); });
}

/// Map2 for any dtype pair: same dtypes directly, mixed ones through f32 staging blocks.
template <int DO, class F>
HWY_INLINE void Map2Any(const void* a, int da, const void* b, int db, void* out, std::size_t n,
                        const F& f) {
  if (da == db) {
    WithDType(da, [&](auto t) { Map2<decltype(t)::value, decltype(t)::value, DO>(a, b, out, n, f); });
    return;
  }
  alignas(64) float sa[kStage];
  alignas(64) float sb[kStage];
  for (std::size_t i = 0; i < n; i += kStage) {
    const std::size_t m = n - i < kStage ? n - i : kStage;
    WidenBlock(Offset(a, da, i), da, sa, m);
    WidenBlock(Offset(b, db, i), db, sb, m);
    Map2<kF32, kF32, DO>(sa, sb, Offset(out, DO, i), m, f);
  }
}

// ------------------------------------------------------------------ op tables

/// Calls fn(M{}) with M the vector struct of op (vecmath-inl.h, cpu::vec).
template <class Fn>
HWY_INLINE void WithUnary(UnaryOp op, Fn&& fn) {
  switch (op) {
#define MIXPREC_UNARY_CASE(o, ...) \
  case UnaryOp::o: return fn(vec::o{});
    MIXPREC_UNARY_OPS(MIXPREC_UNARY_CASE)
#undef MIXPREC_UNARY_CASE
  }
}

template <class Fn>
HWY_INLINE void WithBinary(BinaryOp op, Fn&& fn) {
  switch (op) {
#define MIXPREC_BINARY_CASE(o, ...) \
  case BinaryOp::o: return fn(vec::o{});
    MIXPREC_BINARY_OPS(MIXPREC_BINARY_CASE)
#undef MIXPREC_BINARY_CASE
  }
}

// ------------------------------------------------------------------ exported row kernels

void UnaryRow(int op, const void* in, int din, void* out, int dout, std::size_t n) {
  WithDType(din, [&](auto ti) {
    WithDType(dout, [&](auto to) {
      WithUnary(static_cast<UnaryOp>(op), [&](auto m) {
        Map1<decltype(ti)::value, decltype(to)::value>(in, out, n,
                                                        [](DF d, VF x) { return decltype(m)::forward(d, x); });
      });
    });
  });
}

void BinaryRow(int op, const void* a, int da, const void* b, int db, int side, float scalar,
               void* out, int dout, std::size_t n) {
  WithDType(dout, [&](auto to) {
    constexpr int DO = decltype(to)::value;
    WithBinary(static_cast<BinaryOp>(op), [&](auto m) {
      const auto f = [](DF d, VF p, VF q) { return decltype(m)::apply(d, p, q); };
      if (side == static_cast<int>(ScalarSide::none)) {
        Map2Any<DO>(a, da, b, db, out, n, f);
      } else if (side == static_cast<int>(ScalarSide::b)) {
        WithDType(da, [&](auto ta) {
          Map1<decltype(ta)::value, DO>(a, out, n, [&](DF d, VF x) {
            return f(d, x, hn::Set(d, scalar));
          });
        });
      } else {
        WithDType(db, [&](auto tb) {
          Map1<decltype(tb)::value, DO>(b, out, n, [&](DF d, VF x) {
            return f(d, hn::Set(d, scalar), x);
          });
        });
      }
    });
  });
}

void AffineRow(const void* in, int din, void* out, int dout, std::size_t n, float alpha,
               float beta) {
  WithDType(din, [&](auto ti) {
    WithDType(dout, [&](auto to) {
      Map1<decltype(ti)::value, decltype(to)::value>(in, out, n, [&](DF d, VF x) {
        return hn::Add(hn::Mul(hn::Set(d, alpha), x), hn::Set(d, beta));
      });
    });
  });
}

void UnaryBackwardRow(int op, const void* v, int dv, const void* dy, int dg, void* dx, int dout,
                      std::size_t n) {
  WithDType(dout, [&](auto to) {
    WithUnary(static_cast<UnaryOp>(op), [&](auto m) {
      Map2Any<decltype(to)::value>(v, dv, dy, dg, dx, n,
                                   [](DF d, VF x, VF g) { return decltype(m)::backward(d, x, g); });
    });
  });
}

void FillRow(void* out, int dt, std::size_t n, float value) {
  WithDType(dt, [&](auto t) {
    constexpr int DT = decltype(t)::value;
    const DF d;
    const std::size_t N = hn::Lanes(d);
    const VF v = hn::Set(d, value);
    std::size_t i = 0;
    for (; i + N <= n; i += N) StoreF32<DT>(d, v, out, i);
    if (i < n) StoreF32N<DT>(d, v, out, i, n - i);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {

HWY_EXPORT(UnaryRow);
HWY_EXPORT(BinaryRow);
HWY_EXPORT(AffineRow);
HWY_EXPORT(UnaryBackwardRow);
HWY_EXPORT(FillRow);

namespace {
static_assert(static_cast<int>(DType::f32) == 0 && static_cast<int>(DType::bf16) == 1 &&
              static_cast<int>(DType::f16) == 2);
int code(DType t) {
  MIXPREC_ASSERT(!is_storage_only(t));
  return static_cast<int>(t);
}
std::size_t count(std::int64_t n) { return static_cast<std::size_t>(n); }
}  // namespace

void unary_row(UnaryOp op, const void* in, DType in_dtype, void* out, DType out_dtype,
               std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(UnaryRow)(static_cast<int>(op), in, code(in_dtype), out, code(out_dtype),
                                 count(n));
}

void binary_row(BinaryOp op, const void* a, DType a_dtype, const void* b, DType b_dtype,
                ScalarSide side, float scalar, void* out, DType out_dtype, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryRow)(static_cast<int>(op), a, code(a_dtype), b, code(b_dtype),
                                  static_cast<int>(side), scalar, out, code(out_dtype),
                                  count(n));
}

void affine_row(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
                float alpha, float beta) {
  HWY_DYNAMIC_DISPATCH(AffineRow)(in, code(in_dtype), out, code(out_dtype), count(n), alpha,
                                  beta);
}

void unary_backward_row(UnaryOp op, const void* v, DType v_dtype, const void* dy, DType dy_dtype,
                        void* dx, DType dx_dtype, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(UnaryBackwardRow)(static_cast<int>(op), v, code(v_dtype), dy,
                                         code(dy_dtype), dx, code(dx_dtype), count(n));
}

void fill_row(void* out, DType dtype, std::int64_t n, float value) {
  HWY_DYNAMIC_DISPATCH(FillRow)(out, code(dtype), count(n), value);
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
