#pragma once
/// Helpers shared by the dispatching kernel files (cpu/*.cpp, never the *_avx512.cpp ones):
/// the AVX-512 availability check with its reason for verbose logs, OpenMP loops above a size
/// threshold, and byte offsets into untyped buffers.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/parallel_chunks.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cpu {

using mixprec::kParallelMinWork;
using mixprec::parallel_chunks;
using mixprec::parallel_for;

/// Empty when AVX-512 kernels may run; else why not, for the verbose log.
inline std::string avx512_unavailable_reason() {
  if (isa_allowed(Isa::avx512)) return {};
  const CpuFeatures& f = cpu_features();
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c)) {
    return "avx512: CPU lacks avx512f/bw/vl/dq";
  }
  return std::string("avx512: ISA capped at ") + name(max_isa()) + " (MIXPREC_ISA/set_max_isa)";
}

/// "bf16", or "bf16->f32" when the output dtype differs.
inline std::string dtype_label(DType in, DType out) {
  std::string s = name(in);
  if (out != in) s.append("->").append(name(out));
  return s;
}

/// One verbose line for a kernel call: "avx512" or "reference", and why the faster one was not.
inline void log_impl(std::string_view op, const std::string& dtype, bool vectorised,
                     std::string_view why_not) {
  if (!verbose_enabled()) return;
  verbose_log(op, dtype, vectorised ? "avx512" : "reference", why_not);
}

/// p advanced by i elements of dtype.
inline const void* at(const void* p, DType dtype, std::int64_t i) {
  return static_cast<const char*>(p) + i * static_cast<std::int64_t>(size_of(dtype));
}
inline void* at(void* p, DType dtype, std::int64_t i) {
  return static_cast<char*>(p) + i * static_cast<std::int64_t>(size_of(dtype));
}

/// Element i of a buffer of dtype, widened to f32 (exact).
inline float load_f32(const void* p, DType dtype, std::int64_t i) {
  return dispatch(dtype, [&](auto t) {
    return static_cast<float>(static_cast<const decltype(t)*>(p)[i]);
  });
}

/// Whether the AVX-512 kernels cover an input/output dtype pair: same dtype, or f32 output.
/// Never a storage-only (fp8) dtype: the vector kernels read dtype codes 0-2 only, and the
/// reference they fall back to throws DTypeError for fp8 through dispatch().
inline bool avx512_dtype_pair(DType in, DType out) {
  return !is_storage_only(in) && !is_storage_only(out) && (out == in || out == DType::f32);
}

}  // namespace mixprec::kernels::cpu
