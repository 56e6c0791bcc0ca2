#pragma once
// Integers out of nlohmann::json without undefined behaviour. nlohmann's get<int>() on a JSON
// number with a fraction or exponent (1e300) casts the double to int, which is undefined when it
// does not fit (UBSan: "outside the range of representable values"), and an integer that does
// not fit the target type is silently truncated. Found by fuzz/fuzz_train_config.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "mixprec/core/error.h"

namespace mixprec::io {

/// v as a T: ValueError "<op>: <what> must be an integer in [min, max], not <v>" unless v is a
/// JSON integer (no fraction, no exponent) within T's range.
template <class T>
T json_integer(const nlohmann::json& v, const char* op, const std::string& what) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (std::in_range<T>(x)) return static_cast<T>(x);
  } else if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (std::in_range<T>(x)) return static_cast<T>(x);
  }
  MIXPREC_CHECK(false, ValueError, op,
                what << " must be an integer in [" << +std::numeric_limits<T>::min() << ", "
                     << +std::numeric_limits<T>::max() << "], not " << v.dump());
  return T{};
}

/// json_integer of obj[key] if obj has key, else fallback (obj.value(key, fallback) made safe;
/// like it, throws nlohmann's type_error if obj is not an object).
template <class T>
T json_integer_or(const nlohmann::json& obj, const char* key, T fallback, const char* op,
                  const std::string& what) {
  if (obj.is_object() && !obj.contains(key)) return fallback;
  return json_integer<T>(obj.at(key), op, what + ": field '" + key + "'");
}

}  // namespace mixprec::io
