// The fp8 GEMM's spec: the argument checks every backend runs, and a plain triple loop.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/fp8_gemm.h"
#include "kernels/spec/fp8_scale_math.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {
namespace {

constexpr const char* kOp = "fp8_gemm";

bool is_fp8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }
bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

/// The operand's values, row by row: decode(q) * (1 / scale).
std::vector<float> operand(const void* q, DType t, std::int64_t count, float scale) {
  const auto* bits = static_cast<const std::uint8_t*>(q);
  const float inv = 1.0f / scale;
  const bool e4m3 = t == DType::f8e4m3;
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = fp8_math::operand_value(bits[i], e4m3, inv);
  return v;
}

float load_f32(const void* p, DType t, std::size_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::f16: return f16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    default: break;  // validate_fp8_gemm admits no other bias dtype
  }
  MIXPREC_ASSERT(false);
  return 0.0f;
}

void store(void* c, DType t, std::size_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(c)[i] = v; return;
    case DType::bf16: static_cast<std::uint16_t*>(c)[i] = f32_to_bf16_bits(v); return;
    case DType::f16: static_cast<std::uint16_t*>(c)[i] = f32_to_f16_bits(v); return;
    default: break;  // validate_fp8_gemm admits no other C dtype
  }
  MIXPREC_ASSERT(false);
}

}  // namespace

void validate_fp8_gemm(const Fp8GemmDesc& d, const void* a, const float* a_scale, const void* b,
                       const float* b_scale, const void* bias, const void* c) {
  MIXPREC_CHECK(d.m >= 0 && d.n >= 0 && d.k >= 0, ShapeError, kOp,
                "m, n and k must be >= 0, got m=" << d.m << " n=" << d.n << " k=" << d.k);
  MIXPREC_CHECK(is_fp8(d.a_dtype) && is_fp8(d.b_dtype), DTypeError, kOp,
                "A and B must be f8e4m3 or f8e5m2, got " << name(d.a_dtype) << " and "
                    << name(d.b_dtype) << "; quantise them with fp8_scaled_cast first");
  MIXPREC_CHECK(d.a_dtype == DType::f8e4m3 || d.b_dtype == DType::f8e4m3, DTypeError, kOp,
                "A and B are both f8e5m2: fp8 Tensor Cores multiply no E5M2 pair; quantise one "
                "operand to f8e4m3 (the recipes' hybrid format puts only gradients in E5M2)");
  MIXPREC_CHECK(is_float(d.c_dtype), DTypeError, kOp,
                "C must be f32, bf16 or f16, got " << name(d.c_dtype));
  const bool empty_product = d.m * d.k == 0 || d.n * d.k == 0;
  MIXPREC_CHECK((a != nullptr && b != nullptr) || empty_product, ValueError, kOp,
                "A or B is a null pointer for a non-empty product (m=" << d.m << " n=" << d.n
                                                                       << " k=" << d.k << ")");
  MIXPREC_CHECK((a_scale != nullptr && b_scale != nullptr) || empty_product, ValueError, kOp,
                "a_scale or b_scale is a null pointer: pass the device f32 scales the operands "
                "were cast with");
  MIXPREC_CHECK(!d.has_bias || is_float(d.bias_dtype), DTypeError, kOp,
                "the bias must be f32, bf16 or f16, got " << name(d.bias_dtype));
  MIXPREC_CHECK(!d.has_bias || bias != nullptr || d.m * d.n == 0, ValueError, kOp,
                "has_bias is set but the bias is a null pointer; pass its n=" << d.n << " values");
  MIXPREC_CHECK(c != nullptr || d.m * d.n == 0, ValueError, kOp,
                "C is a null pointer for a non-empty " << d.m << "x" << d.n << " result");
}

namespace ref {

void fp8_gemm(const Fp8GemmDesc& d, const void* a, const float* a_scale, const void* b,
              const float* b_scale, const void* bias, void* c) {
  validate_fp8_gemm(d, a, a_scale, b, b_scale, bias, c);
  const auto m = static_cast<std::size_t>(d.m);
  const auto n = static_cast<std::size_t>(d.n);
  const auto k = static_cast<std::size_t>(d.k);
  const bool empty = k == 0;
  const std::vector<float> av = empty ? std::vector<float>() : operand(a, d.a_dtype, d.m * d.k, *a_scale);
  const std::vector<float> bv = empty ? std::vector<float>() : operand(b, d.b_dtype, d.n * d.k, *b_scale);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < k; ++p) acc += av[i * k + p] * bv[j * k + p];
      if (d.has_bias) acc += load_f32(bias, d.bias_dtype, j);
      store(c, d.c_dtype, i * n + j, acc);
    }
  }
}

}  // namespace ref
}  // namespace mixprec::kernels
