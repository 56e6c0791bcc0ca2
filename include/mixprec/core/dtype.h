#pragma once
/// Data types, defined once: every property of a dtype is read from the table in this file.
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "mixprec/core/error.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/half.h"

namespace mixprec {

/// Element types of tensors. Reductions, dot products and norms of every dtype accumulate in f32.
/// f8e4m3 and f8e5m2 are storage-only dtypes (see DTypeTraits::storage_only).
enum class DType : std::uint8_t { f32, bf16, f16, f8e4m3, f8e5m2 };

/// Everything mixprec knows about a dtype; one row per dtype in kDTypeTable.
struct DTypeTraits {
  DType dtype;
  const char* name;        ///< "f32", "bf16", "f16"
  std::size_t size;        ///< bytes per element
  int exponent_bits;
  int mantissa_bits;       ///< explicit (stored) mantissa bits
  double max;              ///< largest finite value
  double min_normal;       ///< smallest positive normal value
  double min_subnormal;    ///< smallest positive subnormal value
  double epsilon;          ///< distance from 1 to the next larger value (2u, u = unit roundoff)
  DType accumulation;      ///< dtype sums and dot products of this dtype accumulate in
  /// false for OCP FP8 E4M3: no Inf, only S.1111.111 is NaN, so the top binade holds finite
  /// values (max 448) and overflow gives NaN.
  bool has_inf = true;
  /// true for the fp8 dtypes: tensors may be created, cast, copied, viewed, saved and fed to
  /// matmul/linear (decoded to f32), but no kernel computes in them (dispatch() throws).
  bool storage_only = false;
};

/// The single table of dtype properties, indexed by static_cast<size_t>(DType).
inline constexpr std::array<DTypeTraits, 5> kDTypeTable{{
    {DType::f32, "f32", 4, 8, 23, 3.4028234663852886e38, 1.1754943508222875e-38,
     1.401298464324817e-45, 1.1920928955078125e-07, DType::f32},
    {DType::bf16, "bf16", 2, 8, 7, 3.3895313892515355e38, 1.1754943508222875e-38,
     9.183549615799121e-41, 0.0078125, DType::f32},
    {DType::f16, "f16", 2, 5, 10, 65504.0, 6.103515625e-05, 5.960464477539063e-08,
     0.0009765625, DType::f32},
    // OCP OFP8 E4M3 ("fn"): max 1.75 * 2^8 = 448, min normal 2^-6, min subnormal 2^-9, eps 2^-3.
    {DType::f8e4m3, "f8e4m3", 1, 4, 3, 448.0, 0.015625, 0.001953125, 0.125, DType::f32,
     /*has_inf=*/false, /*storage_only=*/true},
    // OCP OFP8 E5M2: max 1.75 * 2^15 = 57344, min normal 2^-14, min subnormal 2^-16, eps 2^-2.
    {DType::f8e5m2, "f8e5m2", 1, 5, 2, 57344.0, 6.103515625e-05, 1.52587890625e-05, 0.25,
     DType::f32, /*has_inf=*/true, /*storage_only=*/true},
}};

/// The traits row of a dtype.
constexpr const DTypeTraits& traits(DType t) noexcept {
  return kDTypeTable[static_cast<std::size_t>(t)];
}
/// Short name of a dtype: "f32", "bf16", "f16", "f8e4m3" or "f8e5m2".
constexpr const char* name(DType t) noexcept { return traits(t).name; }
/// Bytes per element.
constexpr std::size_t size_of(DType t) noexcept { return traits(t).size; }
/// Parses "f32"/"fp32"/"float32", "bf16"/"bfloat16", "f16"/"fp16"/"float16",
/// "f8e4m3"/"fp8_e4m3"/"e4m3"/"float8_e4m3fn", "f8e5m2"/"fp8_e5m2"/"e5m2"/"float8_e5m2";
/// throws ValueError otherwise.
DType parse_dtype(std::string_view text);

/// True for dtypes that only store values (fp8): no kernel computes in them.
constexpr bool is_storage_only(DType t) noexcept { return traits(t).storage_only; }
/// The dtype gradients flowing to a tensor of dtype t are kept in: t, except f32 for
/// storage-only dtypes (a cast to fp8 is a straight-through estimator; its gradient stays f32).
constexpr DType gradient_dtype(DType t) noexcept { return is_storage_only(t) ? DType::f32 : t; }
/// Throws DTypeError "<op>: f8e4m3 is a storage dtype: cast to f32/bf16 first ..." when t is
/// storage-only; every op that computes calls it (through runtime::autocast_inputs or directly).
void require_compute_dtype(const char* op, DType t);

/// The C++ element type stored for a dtype.
template <DType T> struct dtype_type;
template <> struct dtype_type<DType::f32> { using type = float; };
template <> struct dtype_type<DType::bf16> { using type = bfloat16; };
template <> struct dtype_type<DType::f16> { using type = float16; };
template <> struct dtype_type<DType::f8e4m3> { using type = float8_e4m3; };
template <> struct dtype_type<DType::f8e5m2> { using type = float8_e5m2; };

/// The dtype of a C++ element type.
template <class T> inline constexpr DType dtype_of = DType::f32;
template <> inline constexpr DType dtype_of<bfloat16> = DType::bf16;
template <> inline constexpr DType dtype_of<float16> = DType::f16;
template <> inline constexpr DType dtype_of<float8_e4m3> = DType::f8e4m3;
template <> inline constexpr DType dtype_of<float8_e5m2> = DType::f8e5m2;

/// Accumulation type of every element type: float (a bf16 running sum stops growing at 256).
template <class T> using acc_type = float;

namespace detail {
/// Throws the DTypeError of require_compute_dtype for a storage-only dtype.
[[noreturn]] void throw_storage_only(const char* op, DType t);
}  // namespace detail

/// The one place that turns a run-time dtype into a C++ type: calls fn(T{}) for the element type.
/// Storage-only dtypes (fp8) throw DTypeError instead: no kernel is instantiated for them.
template <class Fn>
decltype(auto) dispatch(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(bfloat16{});
    case DType::f16: return fn(float16{});
    case DType::f8e4m3:
    case DType::f8e5m2: detail::throw_storage_only("dispatch", t);
  }
  MIXPREC_ASSERT(false);
  return fn(float{});
}

/// dispatch over two or three dtypes at once: fn(a, b[, c]) with one scalar value per dtype
/// (the reference kernels' mixed-dtype loops).
template <class Fn>
decltype(auto) dispatch(DType a, DType b, Fn&& fn) {
  return dispatch(a, [&](auto ta) -> decltype(auto) {
    return dispatch(b, [&](auto tb) -> decltype(auto) { return fn(ta, tb); });
  });
}
template <class Fn>
decltype(auto) dispatch(DType a, DType b, DType c, Fn&& fn) {
  return dispatch(a, b, [&](auto ta, auto tb) -> decltype(auto) {
    return dispatch(c, [&](auto tc) -> decltype(auto) { return fn(ta, tb, tc); });
  });
}

}  // namespace mixprec
