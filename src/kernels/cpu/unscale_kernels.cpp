// Dispatch of the fused unscale + non-finite check: the Highway kernel (unscale_simd.cpp) of the
// best target allowed, for f32, bf16 and f16; OpenMP over fixed chunks above a size threshold.
// Each element's result depends only on itself and inv, the verdict is an OR and amax a max (both
// exact and order-free), so neither the target nor the thread count can change any result.
#include "kernels/cpu/unscale_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/run_pieces.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cpu {

namespace {

// A parallel region costs a few microseconds, about what 32K elements of this kernel cost on one
// core; chunks of 64K elements (256 KiB of f32) keep each thread streaming through memory.
constexpr std::size_t kParallelThreshold = 32768;
constexpr std::size_t kChunk = 65536;

/// Unscales elements [begin, begin + count). amax: as in the kernels (nullptr: not measured).
bool run_chunk(void* data, DType dtype, std::size_t begin, std::size_t count, float inv,
               float* amax) {
  if (dtype == DType::f32) {
    float* p = static_cast<float*>(data) + begin;
    return unscale_f32_simd(p, p, count, inv, amax);
  }
  std::uint16_t* p = static_cast<std::uint16_t*>(data) + begin;
  return unscale_16bit_simd(p, p, count, inv, dtype, amax);
}

}  // namespace

bool unscale_inplace(void* data, DType dtype, std::size_t n, float inv, float* amax) {
  MIXPREC_ASSERT(dtype >= DType::f32 && dtype <= DType::f16);
  // The kernels' verdict relies on it (see unscale_simd.cpp); GradScaler keeps its scale a
  // normal f32, so 1/scale is always finite and non-zero.
  MIXPREC_ASSERT(std::isfinite(inv) && inv != 0.0f);
  MIXPREC_ASSERT(amax == nullptr || *amax >= 0.0f);  // also rejects NaN
  log_simd("unscale", name(dtype));
  if (n < kParallelThreshold) return n > 0 && run_chunk(data, dtype, 0, n, inv, amax);
  const auto chunks = static_cast<std::int64_t>((n + kChunk - 1) / kChunk);
  bool found = false;
  if (amax == nullptr) {
#pragma omp parallel for schedule(static) reduction(|| : found)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
      found = run_chunk(data, dtype, begin, std::min(kChunk, n - begin), inv, nullptr) || found;
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
    found = run_chunk(data, dtype, begin, std::min(kChunk, n - begin), inv, &chunk_amax) || found;
    a = std::max(a, chunk_amax);
  }
  *amax = a;
  return found;
}

void unscale(void* data, DType dtype, std::size_t n, float inv, float* found_inf, float* amax) {
  MIXPREC_ASSERT(found_inf != nullptr);  // the contract (unscale.h): one flag, never null
  if (unscale_inplace(data, dtype, n, inv, amax)) *found_inf = 1.0f;
}

// Every run cut into chunks, all chunks of all runs over the threads together (a model's many
// small gradients no longer run one by one on the calling thread); the verdict is an OR and
// amax a max, so the result is that of one unscale call per run.
void unscale_batch(const UnscaleBatch& batch) {
  MIXPREC_ASSERT(batch.size >= 0 && batch.size <= kUnscaleBatchRuns);
  MIXPREC_ASSERT(batch.found_inf != nullptr);
  MIXPREC_ASSERT(std::isfinite(batch.inv) && batch.inv != 0.0f);
  MIXPREC_ASSERT(batch.amax == nullptr || *batch.amax >= 0.0f);  // also rejects NaN
  for (int r = 0; r < batch.size; ++r) {
    MIXPREC_ASSERT(batch.runs[r].dtype >= DType::f32 && batch.runs[r].dtype <= DType::f16);
    log_simd("unscale", name(batch.runs[r].dtype));
  }
  std::size_t total = 0;
  const std::vector<RunPiece> pieces =
      cut_into_pieces(batch.size, [&](int r) { return batch.runs[r].count; }, kChunk, &total);
  const auto count = static_cast<std::int64_t>(pieces.size());
  const bool want_amax = batch.amax != nullptr;
  bool found = false;
  float a = want_amax ? *batch.amax : 0.0f;
  const auto piece = [&](std::int64_t k, float* piece_amax) {
    const RunPiece& p = pieces[static_cast<std::size_t>(k)];
    const UnscaleRun& run = batch.runs[p.run];
    return run_chunk(run.data, run.dtype, p.begin, p.count, batch.inv, piece_amax);
  };
  if (total < kParallelThreshold) {
    for (std::int64_t k = 0; k < count; ++k) found = piece(k, want_amax ? &a : nullptr) || found;
  } else {
#pragma omp parallel for schedule(static) reduction(|| : found) reduction(max : a)
    for (std::int64_t k = 0; k < count; ++k) {
      float piece_amax = want_amax ? *batch.amax : 0.0f;
      found = piece(k, want_amax ? &piece_amax : nullptr) || found;
      a = std::max(a, piece_amax);
    }
  }
  if (found) *batch.found_inf = 1.0f;
  if (want_amax) *batch.amax = a;
}

}  // namespace mixprec::kernels::cpu
