// The matmul spec: validation shared by every implementation, and a plain triple loop; the
// gelu_tanh post-op with its aux output and backward form on the same loop.
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

// v rounded to dtype t (nearest even) and widened back: what store then load gives.
float round_to(DType t, float v) {
  switch (t) {
    case DType::bf16: return bf16_bits_to_f32(f32_to_bf16_bits(v));
    case DType::f16: return f16_bits_to_f32(f32_to_f16_bits(v));
    default: return v;
  }
}

// Calls f(i, j, acc) for every element of the [m, n] result with acc the f32 dot product of
// row i of op(A) and column j of op(B), summed in order p = 0..k-1.
template <class F>
void for_each_product(const MatmulDesc& d, const void* a, const void* b, F&& f) {
  if (d.m == 0 || d.n == 0) return;
  const auto m = static_cast<std::size_t>(d.m);
  const auto n = static_cast<std::size_t>(d.n);
  const auto k = static_cast<std::size_t>(d.k);
  // op(A) as [m, k] and op(B) transposed to [n, k], both in f32 (exact), so the inner loop is a
  // plain dot product.
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
      f(i, j, acc);
    }
  }
}

// matmul and matmul_aux (aux null: not kept): C = [C +] post_op(AB [+ bias]) per the spec.
void run_gemm(const MatmulDesc& d, const void* a, const void* b, const void* bias, void* c,
              void* aux) {
  if (d.m == 0 || d.n == 0) return;
  const auto n = static_cast<std::size_t>(d.n);
  const auto round_c = [&d](float v) { return round_to(d.c_dtype, v); };
  for_each_product(d, a, b, [&](std::size_t i, std::size_t j, float acc) {
    const float bias_j = d.has_bias ? load(bias, d.bias_dtype, j) : 0.0f;
    if (d.post_op == MatmulPostOp::gelu_tanh) {
      const math::MatmulGelu v = math::matmul_gelu_epilogue(acc, d.has_bias, bias_j, round_c);
      if (aux != nullptr) store(aux, d.c_dtype, i * n + j, v.pre);
      store(c, d.c_dtype, i * n + j, v.out);
      return;
    }
    const float c_old = d.accumulate ? load(c, d.c_dtype, i * n + j) : 0.0f;
    store(c, d.c_dtype, i * n + j,
          math::matmul_epilogue(acc, d.has_bias, bias_j, d.post_op == MatmulPostOp::relu,
                                d.accumulate, c_old));
  });
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
  MIXPREC_CHECK(d.post_op == MatmulPostOp::none || d.post_op == MatmulPostOp::relu ||
                    d.post_op == MatmulPostOp::gelu_tanh,
                ValueError, "matmul", "unknown post-op code " << int(d.post_op));
  MIXPREC_CHECK(!(d.accumulate && d.post_op == MatmulPostOp::gelu_tanh), ValueError, "matmul",
                "the gelu_tanh post-op does not accumulate into C; write a fresh C");
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

void validate_matmul_aux(const MatmulDesc& d, const void* a, const void* b, const void* bias,
                         const void* c, const void* aux) {
  validate_matmul(d, a, b, bias, c);
  MIXPREC_CHECK(d.post_op == MatmulPostOp::gelu_tanh, ValueError, "matmul_aux",
                "keeps the input of the gelu_tanh post-op only; set post_op to gelu_tanh (or call "
                "matmul, which keeps nothing)");
  MIXPREC_CHECK(aux != nullptr || d.m * d.n == 0, ValueError, "matmul_aux",
                "aux is a null pointer for a non-empty " << d.m << "x" << d.n
                    << " result; pass the [M, N] pre-activation buffer (or call matmul)");
}

void validate_matmul_post_op_backward(const MatmulDesc& d, const void* a, const void* b,
                                      const void* aux, const void* c, const void* bias_grad) {
  validate_matmul(d, a, b, bias_grad, c);
  const char* op = "matmul_post_op_backward";
  MIXPREC_CHECK(d.post_op == MatmulPostOp::gelu_tanh, ValueError, op,
                "differentiates the gelu_tanh post-op only; set post_op to gelu_tanh");
  MIXPREC_CHECK(!d.accumulate, ValueError, op, "does not accumulate into C; write a fresh C");
  MIXPREC_CHECK(aux != nullptr || d.m * d.n == 0, ValueError, op,
                "aux is a null pointer for a non-empty " << d.m << "x" << d.n
                    << " result; pass the pre-activation matmul_aux kept");
  MIXPREC_CHECK(!d.has_bias || bias_grad != nullptr || d.n == 0, ValueError, op,
                "has_bias is set but bias_grad is a null pointer; pass the [N] buffer or clear "
                "has_bias");
}

namespace ref {

void matmul(const MatmulDesc& d, const void* a, const void* b, const void* bias, void* c) {
  validate_matmul(d, a, b, bias, c);
  run_gemm(d, a, b, bias, c, nullptr);
}

void matmul_aux(const MatmulDesc& d, const void* a, const void* b, const void* bias, void* c,
                void* aux) {
  validate_matmul_aux(d, a, b, bias, c, aux);
  run_gemm(d, a, b, bias, c, aux);
}

void matmul_post_op_backward(const MatmulDesc& d, const void* a, const void* b, const void* aux,
                             void* c, void* bias_grad) {
  validate_matmul_post_op_backward(d, a, b, aux, c, bias_grad);
  const auto m = static_cast<std::size_t>(d.m);
  const auto n = static_cast<std::size_t>(d.n);
  if (n == 0) return;
  const auto round_c = [&d](float v) { return round_to(d.c_dtype, v); };
  for_each_product(d, a, b, [&](std::size_t i, std::size_t j, float acc) {
    const float x = load(aux, d.c_dtype, i * n + j);
    store(c, d.c_dtype, i * n + j, math::matmul_gelu_backward_epilogue(acc, x, round_c));
  });
  if (!d.has_bias) return;
  // The bias gradient: each column of C as stored, summed in f32 in row order (ref::reduce's
  // order over the rows), rounded once.
  for (std::size_t j = 0; j < n; ++j) {
    float sum = 0.0f;
    for (std::size_t i = 0; i < m; ++i) sum += load(c, d.c_dtype, i * n + j);
    store(bias_grad, d.bias_dtype, j, sum);
  }
}

}  // namespace ref
}  // namespace mixprec::kernels
