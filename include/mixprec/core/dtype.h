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
#include "mixprec/core/half.h"

namespace mixprec {

/// Element types of tensors. Reductions, dot products and norms of every dtype accumulate in f32.
enum class DType : std::uint8_t { f32, bf16, f16 };

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
};

/// The single table of dtype properties, indexed by static_cast<size_t>(DType).
inline constexpr std::array<DTypeTraits, 3> kDTypeTable{{
    {DType::f32, "f32", 4, 8, 23, 3.4028234663852886e38, 1.1754943508222875e-38,
     1.401298464324817e-45, 1.1920928955078125e-07, DType::f32},
    {DType::bf16, "bf16", 2, 8, 7, 3.3895313892515355e38, 1.1754943508222875e-38,
     9.183549615799121e-41, 0.0078125, DType::f32},
    {DType::f16, "f16", 2, 5, 10, 65504.0, 6.103515625e-05, 5.960464477539063e-08,
     0.0009765625, DType::f32},
}};

/// The traits row of a dtype.
constexpr const DTypeTraits& traits(DType t) noexcept {
  return kDTypeTable[static_cast<std::size_t>(t)];
}
/// Short name of a dtype: "f32", "bf16" or "f16".
constexpr const char* name(DType t) noexcept { return traits(t).name; }
/// Bytes per element.
constexpr std::size_t size_of(DType t) noexcept { return traits(t).size; }
/// Parses "f32"/"fp32"/"float32", "bf16"/"bfloat16", "f16"/"fp16"/"float16"; throws ValueError otherwise.
DType parse_dtype(std::string_view text);

/// The C++ element type stored for a dtype.
template <DType T> struct dtype_type;
template <> struct dtype_type<DType::f32> { using type = float; };
template <> struct dtype_type<DType::bf16> { using type = bfloat16; };
template <> struct dtype_type<DType::f16> { using type = float16; };

/// The dtype of a C++ element type.
template <class T> inline constexpr DType dtype_of = DType::f32;
template <> inline constexpr DType dtype_of<bfloat16> = DType::bf16;
template <> inline constexpr DType dtype_of<float16> = DType::f16;

/// Accumulation type of every element type: float (a bf16 running sum stops growing at 256).
template <class T> using acc_type = float;

/// The one place that turns a run-time dtype into a C++ type: calls fn(T{}) for the element type.
template <class Fn>
decltype(auto) dispatch(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(bfloat16{});
    case DType::f16: return fn(float16{});
  }
  MIXPREC_ASSERT(false);
  return fn(float{});
}

}  // namespace mixprec
