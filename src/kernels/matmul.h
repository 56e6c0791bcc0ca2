#pragma once
/// Matrix multiplication on raw row-major buffers: C = op(A) * op(B) [+ bias] [post-op] [+ C];
/// with the gelu_tanh post-op, its pre-activation kept (matmul_aux) and the backward form
/// through it (matmul_post_op_backward): a transformer MLP's Linear + GELU(tanh), which GPUs
/// fuse into the GEMM (cuBLASLt's GELU_AUX_BIAS and DGELU_BGRAD epilogues).
/// f32 and bf16 run through oneDNN (fp32 accumulation) with a primitive cache keyed by shape,
/// dtypes and flags; f16 emulates Tensor Cores: f16 inputs, exact products, fp32 accumulation,
/// the result rounded once to f16 (so it overflows to Inf exactly where a GPU's would).
/// kernels::ref:: is a plain triple loop with fp32 accumulation: the spec.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// Applied after the bias: none; relu (x < 0 ? 0 : x, so NaN propagates like oneDNN's); or
/// gelu_tanh, the elementwise op's own math::gelu_tanh applied to the pre-activation rounded to
/// c_dtype (see "The gelu_tanh post-op" below).
enum class MatmulPostOp : std::uint8_t { none, relu, gelu_tanh };

/// Describes one GEMM. A is [M, K] (or [K, M] stored when trans_a), B is [K, N] (or [N, K]
/// stored when trans_b); C is [M, N] with c_dtype. A and B share `dtype`; bias (optional) is
/// [N] with bias_dtype, added before the post-op. accumulate adds the product to C's content:
/// C = [C +] post_op(op(A) * op(B) [+ bias]), computed in f32 and rounded once to c_dtype
/// (gelu_tanh rounds its input too: below).
/// c_dtype and bias_dtype must each be either `dtype` or f32 (f32 outputs/biases serve
/// master-weight and gradient-accumulation buffers; mixing bf16 with f16 is rejected as a bug).
/// gelu_tanh does not take accumulate (ValueError): nothing needs C + gelu(...), and a GPU
/// epilogue would apply the GELU after adding C.
///
/// The gelu_tanh post-op, its aux output and its backward form. Where the roundings are
/// (spec/matmul_math.h writes it once; acc is the f32 sum of the products, as without a post-op):
///   forward   H = round_c(acc [+ bias])          the pre-activation, as aux stores it
///             C = round_c(gelu_tanh(H))          math::gelu_tanh::forward, the elementwise op's
///   backward  D = round_c(acc)                   the GEMM's own result (dG)
///             C = round_c(gelu_tanh'(aux) D)     math::gelu_tanh::backward(aux, D)
///             bias_grad[j] = round_b(sum_i C[i, j])  C as stored, summed in f32 (the
///                                                    reference in row order, as its reduce)
/// so GELU and its derivative see the pre-activation exactly as the backward reads it back, and
/// the reference and the cpu backend each give the bits of their own unfused kernels (matmul,
/// then unary gelu_tanh; matmul, then unary_backward, then reduce over the rows). round_c rounds to
/// c_dtype (nothing for f32), round_b to bias_dtype. cuBLASLt's epilogues (the cuda backend)
/// apply GELU and its derivative to the unrounded f32 value with a tanh of their own; the
/// tolerance that admits them is in docs/cuda.md ("GELU epilogues").
struct MatmulDesc {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  DType dtype = DType::f32;
  DType c_dtype = DType::f32;
  bool has_bias = false;
  DType bias_dtype = DType::f32;
  MatmulPostOp post_op = MatmulPostOp::none;
  bool accumulate = false;
  /// f32 inputs only: products may be computed from bf16-rounded inputs with f32 accumulation
  /// (oneDNN fpmath_mode::bf16; MatmulPrecision::medium). Honoured only on CPUs with native
  /// bf16 dot products; elsewhere the GEMM runs in full f32 and the verbose log says why.
  bool bf16_fpmath = false;
  /// f32 inputs on a GPU: products on TF32 Tensor Cores (PyTorch's allow_tf32 / matmul
  /// precision high or medium), accumulated in f32; the CPU ignores it.
  bool tf32 = false;

  /// Calls f(DType) for dtype, c_dtype and, with a bias, bias_dtype (kernels/dtype_visit.h).
  template <class F>
  void for_each_dtype(F&& f) const {
    f(dtype);
    f(c_dtype);
    if (has_bias) f(bias_dtype);
  }
};

namespace ref {
/// Runs the GEMM described by desc; throws ShapeError/DTypeError on a bad description and
/// BackendError if oneDNN fails at run time.
/// MIXPREC_MATMUL=ref in the environment forces the reference kernel (for debugging).
void matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c);
/// matmul with the post-op's input kept: C = gelu_tanh(H) and aux = H, the pre-activation
/// round_c(op(A) op(B) [+ bias]) ([M, N], c_dtype, leading dimension N), what the backward
/// form reads. desc.post_op must be gelu_tanh, desc.accumulate false.
void matmul_aux(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c,
                void* aux);
/// The backward through the post-op whose input matmul_aux kept, fused into the GEMM that
/// computes the post-op's output gradient: D = round_c(op(A) op(B)), C = round_c(gelu_tanh'(aux)
/// D) ([M, N], c_dtype; aux as matmul_aux wrote it) and, with has_bias, bias_grad[j] = the
/// column sum over the M rows of C as stored ([N], bias_dtype: f32 or dtype), the bias
/// gradient of the GEMM that made aux. desc.post_op must be gelu_tanh, accumulate false.
void matmul_post_op_backward(const MatmulDesc& desc, const void* a, const void* b,
                             const void* aux, void* c, void* bias_grad);
}  // namespace ref

/// How bf16 GEMMs run. automatic: oneDNN's bf16 kernel when max_isa() >= avx512_bf16 (native
/// bf16 dot products), else A and B widened to f32 (exact) for oneDNN's f32 kernel, because
/// oneDNN 2.6 on AVX-512F without BF16 offers only an emulated bf16 gemm ~3x slower than its
/// f32 brgemm. native and widen force a route (tests, benchmarks). Results agree either way up
/// to f32 summation order: bf16 products are exact in f32.
enum class MatmulBf16Route : std::uint8_t { automatic, native, widen };
/// Sets the bf16 route for the whole process (thread-safe) and returns the previous one.
MatmulBf16Route set_matmul_bf16_route(MatmulBf16Route route);

/// Throws ShapeError (negative m/n/k), DTypeError (dtype rules above, unknown enum values) or
/// ValueError (null pointer for a non-empty operand, bias missing, gelu_tanh with accumulate)
/// for a desc matmul rejects.
void validate_matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias,
                     const void* c);
/// validate_matmul, and ValueError unless post_op is gelu_tanh and aux is non-null (for a
/// non-empty result): what matmul_aux rejects.
void validate_matmul_aux(const MatmulDesc& desc, const void* a, const void* b, const void* bias,
                         const void* c, const void* aux);
/// What matmul_post_op_backward rejects: validate_matmul's rules for the GEMM (has_bias and
/// bias_dtype describe bias_grad), and ValueError unless post_op is gelu_tanh, accumulate is
/// off and aux (and bias_grad with has_bias) are non-null for a non-empty result.
void validate_matmul_post_op_backward(const MatmulDesc& desc, const void* a, const void* b,
                                      const void* aux, const void* c, const void* bias_grad);

/// Number of oneDNN primitives in matmul's cache (bounded LRU, thread-safe); for tests.
std::size_t matmul_cache_size();
/// Number of matmul calls that found their primitive in the cache since the process started.
std::uint64_t matmul_cache_hits();
/// Empties the primitive cache (the hit counter keeps counting); for tests.
void matmul_cache_clear();

/// The matmul kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_MATMUL_KERNELS(X) X(matmul) X(matmul_aux) X(matmul_post_op_backward)
MIXPREC_MATMUL_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
