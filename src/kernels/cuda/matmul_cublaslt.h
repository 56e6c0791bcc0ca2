#pragma once
/// The cuda backend's GEMM (matmul_cublaslt.cu) keeps one cuBLASLt plan per problem it has seen:
/// the operation descriptor, the three matrix layouts and the algorithm cuBLASLt's heuristic
/// chose. This header is for tests and statistics.
#include <cstddef>

namespace mixprec::kernels::cuda {

/// Number of cuBLASLt plans cached now (bounded: the cache empties itself when full;
/// thread-safe).
std::size_t cublaslt_cache_size();

}  // namespace mixprec::kernels::cuda
