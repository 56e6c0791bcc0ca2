// The matmul spec: validation shared by every implementation, and a plain triple loop.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/spec/matmul_math.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {
namespace {

bool known(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// Loads element i of a buffer of dtype t to float (exact for every dtype).
float load(const void* p, DType t, std::size_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::f16: return f16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::f8e4m3:
    case DType::f8e5m2: break;  // rejected by validate_matmul: ops decode fp8 to f32 first
  }
  MIXPREC_ASSERT(false);
  return 0.0f;
}

// Rounds v to dtype t (nearest even) and stores it as element i.
void store(void* p, DType t, std::size_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = v; return;
    case DType::bf16: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16_bits(v); return;
    case DType::f16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16_bits(v); return;
    case DType::f8e4m3:
    case DType::f8e5m2: break;  // rejected by validate_matmul
  }
  MIXPREC_ASSERT(false);
}

}  // namespace

void validate_matmul(const MatmulDesc& d, const void* a, const void* b, const void* bias,
                     const void* c) {
  MIXPREC_CHECK(d.m >= 0 && d.n >= 0 && d.k >= 0, ShapeError, "matmul",
                "m, n and k must be >= 0, got m=" << d.m << " n=" << d.n << " k=" << d.k);
  for (DType t : {d.dtype, d.c_dtype, d.bias_dtype}) {
    MIXPREC_CHECK(static_cast<std::size_t>(t) >= kDTypeTable.size() || !is_storage_only(t),
                  DTypeError, "matmul",
                  name(t) << " operands have no GEMM kernel: matmul()/linear() decode fp8 to f32 "
                             "before the GEMM; kernels::matmul takes f32, bf16 and f16");
  }
  MIXPREC_CHECK(known(d.dtype) && known(d.c_dtype) && known(d.bias_dtype), DTypeError, "matmul",
                "unknown dtype code (dtype=" << int(d.dtype) << " c_dtype=" << int(d.c_dtype)
                                             << " bias_dtype=" << int(d.bias_dtype) << ")");
  MIXPREC_CHECK(d.post_op == MatmulPostOp::none || d.post_op == MatmulPostOp::relu, ValueError,
                "matmul", "unknown post-op code " << int(d.post_op));
  MIXPREC_CHECK(d.c_dtype == d.dtype || d.c_dtype == DType::f32, DTypeError, "matmul",
                "C must have the inputs' dtype " << name(d.dtype) << " or f32, got "
                                                 << name(d.c_dtype) << "; cast C or the inputs first");
  MIXPREC_CHECK(!d.has_bias || d.bias_dtype == d.dtype || d.bias_dtype == DType::f32, DTypeError,
                "matmul",
                "bias must have the inputs' dtype " << name(d.dtype) << " or f32, got "
                                                    << name(d.bias_dtype) << "; cast the bias first");
  MIXPREC_CHECK((a != nullptr && b != nullptr) || d.m * d.k == 0 || d.n * d.k == 0, ValueError,
                "matmul", "A or B is a null pointer for a non-empty product (m=" << d.m << " n="
                                                                              << d.n << " k=" << d.k << ")");
  MIXPREC_CHECK(c != nullptr || d.m * d.n == 0, ValueError, "matmul",
                "C is a null pointer for a non-empty " << d.m << "x" << d.n << " result");
  MIXPREC_CHECK(!d.has_bias || bias != nullptr || d.m * d.n == 0, ValueError, "matmul",
                "has_bias is set but bias is a null pointer; pass the [N] bias or clear has_bias");
}

namespace ref {

void matmul(const MatmulDesc& d, const void* a, const void* b, const void* bias, void* c) {
  validate_matmul(d, a, b, bias, c);
  const auto m = static_cast<std::size_t>(d.m);
  const auto n = static_cast<std::size_t>(d.n);
  const auto k = static_cast<std::size_t>(d.k);
  if (m == 0 || n == 0) return;
  // op(A) as [m, k] and op(B) transposed to [n, k], both in f32 (exact), so the inner loop is a
  // plain dot product summed in order p = 0..k-1.
  std::vector<float> a32(m * k), bt32(n * k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p)
      a32[i * k + p] = load(a, d.dtype, d.trans_a ? p * m + i : i * k + p);
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t p = 0; p < k; ++p)
      bt32[j * k + p] = load(b, d.dtype, d.trans_b ? j * k + p : p * n + j);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < k; ++p) acc += a32[i * k + p] * bt32[j * k + p];
      const float bias_j = d.has_bias ? load(bias, d.bias_dtype, j) : 0.0f;
      const float c_old = d.accumulate ? load(c, d.c_dtype, i * n + j) : 0.0f;
      store(c, d.c_dtype, i * n + j,
            math::matmul_epilogue(acc, d.has_bias, bias_j, d.post_op == MatmulPostOp::relu,
                                  d.accumulate, c_old));
    }
  }
}

}  // namespace ref
}  // namespace mixprec::kernels
