#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/core/dtype.h"

namespace mixprec {
namespace {

// The table's numbers follow from its bit counts; check them against the IEEE/bfloat16 formulas.
TEST(DTypeTable, ValuesFollowFromBitCounts) {
  for (const DTypeTraits& t : kDTypeTable) {
    SCOPED_TRACE(t.name);
    const int bias = (1 << (t.exponent_bits - 1)) - 1;
    EXPECT_EQ(t.size * 8, static_cast<std::size_t>(1 + t.exponent_bits + t.mantissa_bits));
    EXPECT_DOUBLE_EQ(t.epsilon, std::ldexp(1.0, -t.mantissa_bits));
    EXPECT_DOUBLE_EQ(t.min_normal, std::ldexp(1.0, 1 - bias));
    EXPECT_DOUBLE_EQ(t.min_subnormal, std::ldexp(1.0, 1 - bias - t.mantissa_bits));
    if (t.has_inf) {  // IEEE-like: the all-ones exponent holds Inf/NaN
      EXPECT_DOUBLE_EQ(t.max, (2.0 - std::ldexp(1.0, -t.mantissa_bits)) * std::ldexp(1.0, bias));
    } else {  // OCP E4M3: only S.1111.111 is NaN, so the top binade holds finite values
      const double top = 2.0 - std::ldexp(2.0, -t.mantissa_bits);  // mantissa 1.110
      EXPECT_DOUBLE_EQ(t.max, top * std::ldexp(1.0, bias + 1));
    }
    EXPECT_EQ(t.accumulation, DType::f32);
    EXPECT_EQ(&traits(t.dtype), &t);
  }
}

TEST(DTypeTable, MaxMatchesScalarTypes) {
  EXPECT_EQ(static_cast<double>(bfloat16::from_bits(0x7f7f)), traits(DType::bf16).max);
  EXPECT_EQ(static_cast<double>(float16::from_bits(0x7bff)), traits(DType::f16).max);
}

TEST(DTypeParse, AcceptsAliasesAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("fp16"), DType::f16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("f32"), DType::f32);
  try {
    parse_dtype("fp8");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("parse_dtype: unknown dtype 'fp8'"), std::string::npos);
  }
}

TEST(DTypeDispatch, CallsWithTheElementType) {
  EXPECT_EQ(dispatch(DType::bf16, [](auto v) { return dtype_of<decltype(v)>; }), DType::bf16);
  EXPECT_EQ(dispatch(DType::f16, [](auto v) { return sizeof(v); }), 2u);
  EXPECT_EQ(dispatch(DType::f32, [](auto v) { return sizeof(v); }), 4u);
}

}  // namespace
}  // namespace mixprec
