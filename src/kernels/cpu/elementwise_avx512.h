#pragma once
/// AVX-512 elementwise kernels over contiguous buffers (elementwise_avx512.cpp). Plain
/// declarations only: this header is included by the AVX-512 file itself, so it must not pull in
/// inline code. Call only when max_isa() >= Isa::avx512. Dtype codes are DType's underlying
/// values (0 f32, 1 bf16, 2 f16); results are rounded once, RNE, like the reference. Each
/// function returns false, doing nothing, for a dtype combination it does not cover: it covers
/// out_dtype == input dtype, and out_dtype == f32.
#include <cstdint>

namespace mixprec::kernels::avx512 {

/// Mirrors kernels::UnaryOp value for value (static_asserts in cpu/elementwise.cpp).
enum class VUnary : int { neg, abs, exp, log, sqrt, rsqrt, reciprocal, square, relu, gelu, tanh,
                          sigmoid };
/// Mirrors kernels::BinaryOp value for value.
enum class VBinary : int { add, sub, mul, div, maximum, minimum };

/// out[i] = op(in[i]), i < n.
bool unary(VUnary op, const void* in, int in_dtype, void* out, int out_dtype, std::int64_t n);
/// out[i] = op(a[i], b[i]); a and b share `dtype`.
bool binary_vv(VBinary op, const void* a, const void* b, int dtype, void* out, int out_dtype,
               std::int64_t n);
/// out[i] = op(a[i], s), or op(s, a[i]) when scalar_left.
bool binary_vs(VBinary op, const void* a, int dtype, float s, bool scalar_left, void* out,
               int out_dtype, std::int64_t n);
/// out[i] = alpha * in[i] + beta.
bool affine(const void* in, int in_dtype, void* out, int out_dtype, std::int64_t n, float alpha,
            float beta);
/// dx[i] = dy[i] * op'(...) where v is the forward input x for abs/log/square/relu/gelu and the
/// forward output y for every other op; v and dy share `dtype`.
bool unary_backward(VUnary op, const void* v, const void* dy, int dtype, void* dx, int dx_dtype,
                    std::int64_t n);
/// out[i] = value rounded to dtype.
void fill(void* out, int dtype, std::int64_t n, float value);

}  // namespace mixprec::kernels::avx512
