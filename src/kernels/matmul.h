#pragma once
/// Matrix multiplication on raw row-major buffers: C = op(A) * op(B) [+ bias] [relu] [+ C].
/// f32 and bf16 run through oneDNN (fp32 accumulation) with a primitive cache keyed by shape,
/// dtypes and flags; f16 emulates Tensor Cores: f16 inputs, exact products, fp32 accumulation,
/// the result rounded once to f16 (so it overflows to Inf exactly where a GPU's would).
/// kernels::ref:: is a plain triple loop with fp32 accumulation: the spec.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// Applied after the bias: none, or relu (x < 0 ? 0 : x, so NaN propagates like oneDNN's).
enum class MatmulPostOp : std::uint8_t { none, relu };

/// Describes one GEMM. A is [M, K] (or [K, M] stored when trans_a), B is [K, N] (or [N, K]
/// stored when trans_b); C is [M, N] with c_dtype. A and B share `dtype`; bias (optional) is
/// [N] with bias_dtype, added before the post-op. accumulate adds the product to C's content:
/// C = [C +] post_op(op(A) * op(B) [+ bias]), computed in f32 and rounded once to c_dtype.
/// c_dtype and bias_dtype must each be either `dtype` or f32 (f32 outputs/biases serve
/// master-weight and gradient-accumulation buffers; mixing bf16 with f16 is rejected as a bug).
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
/// ValueError (null pointer for a non-empty operand, bias missing) for a desc matmul rejects.
void validate_matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias,
                     const void* c);

/// Number of oneDNN primitives in matmul's cache (bounded LRU, thread-safe); for tests.
std::size_t matmul_cache_size();
/// Number of matmul calls that found their primitive in the cache since the process started.
std::uint64_t matmul_cache_hits();
/// Empties the primitive cache (the hit counter keeps counting); for tests.
void matmul_cache_clear();

/// The matmul kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_MATMUL_KERNELS(X) X(matmul)
MIXPREC_MATMUL_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
