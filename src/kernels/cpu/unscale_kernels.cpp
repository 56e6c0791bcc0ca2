// Dispatch of the fused unscale + non-finite check: AVX-512 for f32 when allowed, the reference
// otherwise; OpenMP over fixed chunks above a size threshold. Each element's result depends only
// on itself and inv, the verdict is an OR and amax a max (both exact and order-free), so neither
// the ISA nor the thread count can change any result.
#include "kernels/cpu/unscale_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {

static_assert(kUnscaleF32 == static_cast<int>(DType::f32));
static_assert(kUnscaleBF16 == static_cast<int>(DType::bf16));
static_assert(kUnscaleF16 == static_cast<int>(DType::f16));

namespace {

// A parallel region costs a few microseconds, about what 32K elements of this kernel cost on one
// core; chunks of 64K elements (256 KiB of f32) keep each thread streaming through memory.
constexpr std::size_t kParallelThreshold = 32768;
constexpr std::size_t kChunk = 65536;

/// Why the AVX-512 kernel did not run (empty if it did), for the verbose log.
std::string skipped_reason(DType dtype, bool vector) {
  if (vector) return {};
  if (dtype != DType::f32) return "avx512: no vector kernel for 16-bit gradients";
  const CpuFeatures& f = cpu_features();
  if (!(f.avx512f && f.avx512dq)) return "avx512: CPU lacks avx512f/avx512dq";
  return std::string("avx512: ISA capped at ") + name(max_isa()) + " (MIXPREC_ISA/set_max_isa)";
}

/// Unscales elements [begin, begin + count) with the chosen implementation.
/// amax: as in the kernels (nullptr: not measured).
bool run_chunk(void* data, DType dtype, bool vector, std::size_t begin, std::size_t count,
               float inv, float* amax) {
  if (dtype == DType::f32) {
    float* p = static_cast<float*>(data) + begin;
    return vector ? unscale_f32_avx512(p, p, count, inv, amax)
                  : unscale_f32_ref(p, p, count, inv, amax);
  }
  std::uint16_t* p = static_cast<std::uint16_t*>(data) + begin;
  return unscale_16bit_ref(p, p, count, inv, static_cast<int>(dtype), amax);
}

}  // namespace

namespace cpu {
bool unscale_inplace(void* data, int dtype_code, std::size_t n, float inv, float* amax) {
  MIXPREC_ASSERT(dtype_code >= kUnscaleF32 && dtype_code <= kUnscaleF16);
  // The AVX-512 verdict relies on it (see unscale_kernels_avx512.cpp); GradScaler keeps its
  // scale a normal f32, so 1/scale is always finite and non-zero.
  MIXPREC_ASSERT(std::isfinite(inv) && inv != 0.0f);
  MIXPREC_ASSERT(amax == nullptr || *amax >= 0.0f);  // also rejects NaN
  const auto dtype = static_cast<DType>(dtype_code);
  const bool vector = dtype == DType::f32 && isa_allowed(Isa::avx512);
  if (verbose_enabled()) {
    verbose_log("unscale", name(dtype), vector ? "avx512" : "reference",
                skipped_reason(dtype, vector));
  }
  if (n < kParallelThreshold) return n > 0 && run_chunk(data, dtype, vector, 0, n, inv, amax);
  const auto chunks = static_cast<std::int64_t>((n + kChunk - 1) / kChunk);
  bool found = false;
  if (amax == nullptr) {
#pragma omp parallel for schedule(static) reduction(|| : found)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
      found = run_chunk(data, dtype, vector, begin, std::min(kChunk, n - begin), inv, nullptr) ||
              found;
    }
    return found;
  }
  // The kernels want a non-negative start, so each chunk starts from the caller's value (which
  // changes no max); OpenMP then combines the threads' maxima with the original.
  float a = *amax;
#pragma omp parallel for schedule(static) reduction(|| : found) reduction(max : a)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    float chunk_amax = *amax;
    found = run_chunk(data, dtype, vector, begin, std::min(kChunk, n - begin), inv, &chunk_amax) ||
            found;
    a = std::max(a, chunk_amax);
  }
  *amax = a;
  return found;
}
}  // namespace cpu

}  // namespace mixprec::kernels
