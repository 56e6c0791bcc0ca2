#pragma once
/// The cuda backend's GEMM (matmul_cublaslt.cu) keeps one cuBLASLt plan per problem it has seen:
/// the operation descriptor, the three matrix layouts and the algorithm cuBLASLt's heuristic
/// chose. This header is for tests and statistics.
#include <cstddef>
#include <cstdint>

#include "kernels/fp8_gemm.h"

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

}  // namespace mixprec::kernels::cuda
