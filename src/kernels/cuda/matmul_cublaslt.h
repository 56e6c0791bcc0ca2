#pragma once
/// The cuda backend's GEMM (matmul_cublaslt.cu) keeps one cuBLASLt plan per problem it has seen:
/// the operation descriptor, the three matrix layouts and the algorithm cuBLASLt's heuristic
/// chose. This header is for tests and statistics.
#include <cstddef>
#include <cstdint>

#include "kernels/fp8_gemm.h"
#include "kernels/matmul.h"

namespace mixprec::kernels::cuda {

/// Number of cuBLASLt plans cached now (bounded: the cache empties itself when full;
/// thread-safe).
std::size_t cublaslt_cache_size();

/// C[i] = alpha op(A[i]) op(B[i]) for i < batch, by one cuBLASLt call: f32 row-major matrices
/// stored back to back (A[i] at a + i m k, B[i] at b + i k n, C[i] at c + i m n; trans_a: A[i]
/// stored [k, m], trans_b: B[i] stored [n, k]), f32 accumulation and output; products on TF32
/// Tensor Cores when tf32 (exact for operands that are bf16 or f16 values). k == 0 is not
/// taken. Attention's score and probability products (attention_gemm.cu) run through it.
void batched_gemm_f32(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                      bool trans_a, bool trans_b, float alpha, const float* a, const float* b,
                      float* c, bool tf32);

/// What fp8_gemm_cublaslt did: ran (false: cuBLASLt has no algorithm for this problem, nothing
/// was written) and whether its plan came from the cache.
struct Fp8CublasLtRun {
  bool ran = false;
  bool cached = false;
};

/// The fp8 GEMM of kernels/fp8_gemm.h by one cuBLASLt call on Tensor Cores (sm_89 and newer):
/// C = (A * a_factor) (B * b_factor)ᵀ, f32 accumulation (fast_accum: cuBLASLt's FAST_ACCUM),
/// C of d.c_dtype; a_factor and b_factor are device f32, the reciprocals of the operands'
/// quantisation scales. Arguments are the caller's to validate. The plan (per shape, dtypes and
/// alignment) is cached with the other GEMMs'.
Fp8CublasLtRun fp8_gemm_cublaslt(const Fp8GemmDesc& d, const void* a, const float* a_factor,
                                 const void* b, const float* b_factor, void* c);

/// cuBLASLt's GELU epilogues (the gelu_tanh post-op of kernels/matmul.h, matmul_gelu.cu):
///   forward         GELU_BIAS / GELU: C = gelu(op(A) op(B) [+ bias])
///   forward_aux     GELU_AUX_BIAS / GELU_AUX: the same, the pre-activation written to aux
///   backward        DGELU: C = gelu'(aux) op(A) op(B)
///   backward_bgrad  DGELU_BGRAD: the same, and bias = the column sums of C (the gradient)
/// cuBLASLt computes GELU and its derivative with its own tanh from the f32 sums (no rounding
/// of the pre-activation or of the product first), which the spec admits within a tolerance
/// (docs/cuda.md, "GELU epilogues").
enum class LtGelu : std::uint8_t { none, forward, forward_aux, backward, backward_bgrad };

/// What gelu_gemm_cublaslt did: ran (false: cuBLASLt has no algorithm for this problem or
/// refused the call, nothing was written; remembered per problem) and whether its plan came
/// from the cache.
struct CublasLtRun {
  bool ran = false;
  bool cached = false;
};

/// The GEMM of d (k > 0, accumulate off, post_op ignored) with the GELU epilogue `kind`, C of
/// d.c_dtype, aux [m, n] of d.c_dtype with leading dimension n (cuBLASLt wants n % 8 == 0: the
/// caller checks); bias: forward, the [n] bias of d.c_dtype when d.has_bias; backward_bgrad,
/// the [n] bias gradient of d.bias_dtype it writes. Arguments are the caller's to validate.
/// The plan (per shape, dtypes, epilogue and alignment) is cached with the other GEMMs'.
CublasLtRun gelu_gemm_cublaslt(const MatmulDesc& d, const void* a, const void* b,
                               const void* bias, void* c, const void* aux, LtGelu kind);

/// The gelu_tanh post-op (matmul_gelu.cu; matmul and matmul_aux run it): cuBLASLt's GELU
/// epilogue where it takes the problem, else matmul without the post-op and the gelu_tanh
/// kernel. desc validated by the caller, m, n > 0; aux null: the pre-activation is not kept.
void gelu_matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c,
                 void* aux);

}  // namespace mixprec::kernels::cuda
