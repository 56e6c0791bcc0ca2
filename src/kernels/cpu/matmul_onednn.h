#pragma once
/// One GEMM through a cached oneDNN matmul primitive, for the dtype combinations oneDNN runs
/// directly; kernels::matmul (matmul.cpp) converts everything else to one of these.
#include <cstdint>
#include <string>

#include "kernels/matmul.h"

namespace mixprec::kernels::cpu {

/// Filled by onednn_matmul when the caller wants to log what ran.
struct OnednnInfo {
  std::string impl;     ///< "onednn:" + oneDNN's impl_info_str(), e.g. "onednn:brg:avx512_core"
  bool cached = false;  ///< the primitive (or the verdict that none is usable) came from the cache
};

/// Runs desc with one oneDNN matmul primitive, transposes expressed as strides (no copies).
/// Requires m, n, k > 0, dtype f32 or bf16, and c_dtype/bias_dtype f32 or equal to dtype.
/// Returns false, leaving C untouched, when oneDNN has no implementation or only its slow
/// reference one (the reference is accepted for f32 only, which has no faster fallback).
/// Throws BackendError if oneDNN fails otherwise. info may be null. ldb > 0: a non-transposed
/// B's rows are ldb elements apart (>= n) instead of n.
bool onednn_matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias,
                   void* c, OnednnInfo* info, std::int64_t ldb = 0);

}  // namespace mixprec::kernels::cpu
