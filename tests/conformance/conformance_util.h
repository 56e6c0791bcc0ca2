#pragma once
// What the conformance case files share: how an output must match (exact, close), the float
// dtypes, contiguous strides, int data carried in f32 buffers, and the tolerance units.
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance_cases.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::conformance {

inline Out exact(std::string what, ktest::Buffer b) {
  return {std::move(what), std::move(b), true, 0.0, 0.0, {}};
}
inline Out close(std::string what, ktest::Buffer b, double atol, double k) {
  return {std::move(what), std::move(b), false, atol, k, {}};
}

constexpr DType kFloat[] = {DType::f32, DType::bf16, DType::f16};
inline std::vector<DType> all_float() { return {std::begin(kFloat), std::end(kFloat)}; }

/// The dtype's contiguous strides for a shape.
inline std::vector<std::int64_t> contiguous(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

/// int32 data (argmax) carried in an f32-sized buffer, compared by bits.
inline ktest::Buffer int_buffer(const ktest::HostArray<std::int32_t>& v) {
  ktest::Buffer b(DType::f32, static_cast<std::int64_t>(v.size()));
  if (v.size() != 0) std::memcpy(b.data(), v.data(), v.size() * sizeof(std::int32_t));
  return b;
}

// Tolerances. "k" counts units of eps(dtype) relative to |ref|: one rounding of the output is
// 0.5, the vector transcendental functions add a few ulp of f32 (negligible next to a bf16/f16
// rounding, but it can flip one rounding: hence 1 eps of the output dtype plus margin).
constexpr double kRound = 1.0;      // exact-in-f32 math, results rounded once: may differ by
                                    // one rounding only where summation order differs
constexpr double kTranscendental = 4.0;

}  // namespace mixprec::kernels::conformance
