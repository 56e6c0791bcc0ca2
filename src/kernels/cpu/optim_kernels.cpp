// Dispatch of the fused optimizer updates: picks the AVX-512 kernel when allowed, splits large
// tensors into chunks run by OpenMP, and feeds stochastic rounding its counter-based random bits.
// Every element's result depends only on its own inputs and random_bits(stream, index), so the
// chunking and the thread count cannot change any result.
#include "kernels/cpu/optim_kernels.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/random.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {

static_assert(kOptimF32 == static_cast<int>(DType::f32));
static_assert(kOptimBF16 == static_cast<int>(DType::bf16));
static_assert(kOptimF16 == static_cast<int>(DType::f16));

namespace {

// Chunks are independent; below the threshold a call stays on the calling thread.
constexpr std::size_t kChunk = 16384;
constexpr std::size_t kParallelThreshold = 32768;
// Random bits are generated per block into a stack buffer that stays in L1 (8 KiB); a multiple of
// 4 keeps every block on a Philox block boundary, where the vectorised generator starts.
constexpr std::size_t kRandomBlock = 2048;
static_assert(kChunk % kRandomBlock == 0 && kRandomBlock % 4 == 0);

/// The arrays of `a` shifted to start at element `offset`.
OptimArrays advance(const OptimArrays& a, std::size_t offset) {
  OptimArrays r = a;
  const std::size_t param_size = size_of(static_cast<DType>(a.param_dtype));
  const std::size_t grad_size = size_of(static_cast<DType>(a.grad_dtype));
  r.param = static_cast<char*>(a.param) + offset * param_size;
  r.grad = static_cast<const char*>(a.grad) + offset * grad_size;
  if (a.master != nullptr) r.master = a.master + offset;
  if (a.state0 != nullptr) r.state0 = a.state0 + offset;
  if (a.state1 != nullptr) r.state1 = a.state1 + offset;
  r.random = nullptr;
  return r;
}

/// "bf16 (grad f32, fp32 master)": what the verbose log reports as the dtype of an update.
std::string describe(const OptimArrays& a) {
  std::string s = name(static_cast<DType>(a.param_dtype));
  s += " (grad ";
  s += name(static_cast<DType>(a.grad_dtype));
  if (a.write == kWriteMaster) s += ", fp32 master";
  if (a.write == kWriteStochastic) s += ", stochastic rounding";
  return s + ")";
}

template <class Scalars>
using Kernel = void (*)(const OptimArrays&, const Scalars&, std::size_t);

template <class Scalars>
void run(const char* op, const OptimArrays& a, const Scalars& s, std::size_t n,
         std::uint64_t stream, Kernel<Scalars> ref, Kernel<Scalars> avx512) {
  const bool f16_stochastic = a.write == kWriteStochastic && a.param_dtype == kOptimF16;
  const bool vector = isa_allowed(Isa::avx512) && !f16_stochastic;
  const Kernel<Scalars> kernel = vector ? avx512 : ref;
  if (verbose_enabled()) {
    std::string skipped;
    if (f16_stochastic) {
      skipped = "avx512: no vector kernel for f16 stochastic rounding";
    } else if (!vector) {
      skipped = cpu_features().avx512f && cpu_features().avx512bw
                    ? std::string("avx512: capped at ") + name(max_isa()) +
                          " by MIXPREC_ISA or set_max_isa()"
                    : std::string("avx512: CPU lacks avx512f/avx512bw");
    }
    verbose_log(op, describe(a), vector ? "avx512" : "ref", skipped);
  }
  const bool stochastic = a.write == kWriteStochastic;
  auto run_chunk = [&](std::size_t begin, std::size_t count) {
    if (!stochastic) {
      kernel(advance(a, begin), s, count);
      return;
    }
    std::uint32_t random[kRandomBlock];
    for (std::size_t at = begin; at < begin + count; at += kRandomBlock) {
      const std::size_t block = std::min(kRandomBlock, begin + count - at);
      fill_random_bits(stream, at, random, block);
      OptimArrays part = advance(a, at);
      part.random = random;
      kernel(part, s, block);
    }
  };
  if (n < kParallelThreshold) {
    run_chunk(0, n);
    return;
  }
  const auto chunks = static_cast<std::int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    run_chunk(begin, std::min(kChunk, n - begin));
  }
}

}  // namespace

namespace cpu {
void sgd_update(const OptimArrays& a, const SgdScalars& s, std::size_t n, std::uint64_t rng_stream) {
  run<SgdScalars>("sgd_update", a, s, n, rng_stream, &sgd_update_ref, &sgd_update_avx512);
}

void adam_update(const OptimArrays& a, const AdamScalars& s, std::size_t n,
                 std::uint64_t rng_stream) {
  run<AdamScalars>("adam_update", a, s, n, rng_stream, &adam_update_ref, &adam_update_avx512);
}
}  // namespace cpu

}  // namespace mixprec::kernels
