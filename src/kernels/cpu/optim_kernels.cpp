// Dispatch of the fused optimizer updates: checks the arrays, splits large tensors into fixed
// chunks run on all OpenMP threads, feeds stochastic rounding its counter-based random bits, and
// runs the Highway kernel (optim_simd.cpp) of the best target allowed. Every element's result
// depends only on its own inputs and random_bits(stream, index), so neither the chunking, the
// thread count nor the target can change any result.
#include "kernels/cpu/optim_kernels.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/run_pieces.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::cpu {

namespace {

// Chunks are independent; below kParallelMinWork (32K) a call stays on the calling thread.
constexpr std::int64_t kChunk = 16384;
// Random bits are generated per block into a stack buffer that stays in L1 (8 KiB); a multiple of
// 4 keeps every block on a Philox block boundary, where the vectorised generator starts.
constexpr std::size_t kRandomBlock = 2048;
static_assert(kChunk % kRandomBlock == 0 && kRandomBlock % 4 == 0);

/// The arrays of `a` shifted to start at element `offset`.
OptimArrays advance(const OptimArrays& a, std::size_t offset) {
  OptimArrays r = a;
  const std::size_t param_size = size_of(a.param_dtype);
  const std::size_t grad_size = size_of(a.grad_dtype);
  r.param = static_cast<char*>(a.param) + offset * param_size;
  r.grad = static_cast<const char*>(a.grad) + offset * grad_size;
  if (a.master != nullptr) r.master = a.master + offset;
  if (a.copy != nullptr) r.copy = static_cast<std::uint16_t*>(a.copy) + offset;
  if (a.state0 != nullptr) r.state0 = a.state0 + offset;
  if (a.state1 != nullptr) r.state1 = a.state1 + offset;
  r.random = nullptr;
  return r;
}

/// "bf16 (grad f32, fp32 master)": what the verbose log reports as the dtype of an update.
std::string describe(const OptimArrays& a) {
  std::string s = name(a.param_dtype);
  s += " (grad ";
  s += name(a.grad_dtype);
  if (a.write == kWriteMaster) s += ", fp32 master";
  if (a.write == kWriteStochastic) s += ", stochastic rounding";
  if (a.copy != nullptr) s += std::string(", writes the ") + name(a.copy_dtype) + " copy";
  return s + ")";
}

/// The combinations the kernels (and the optimizers) use; anything else is a caller bug.
void check(const OptimArrays& a, bool needs_state0, bool needs_state1) {
  const auto valid = [](DType dtype) { return dtype >= DType::f32 && dtype <= DType::f16; };
  MIXPREC_ASSERT(valid(a.param_dtype) && valid(a.grad_dtype));
  MIXPREC_ASSERT((a.param_dtype == DType::f32) == (a.write == kWriteInPlace));
  MIXPREC_ASSERT(a.write != kWriteMaster || a.master != nullptr);
  MIXPREC_ASSERT(a.copy == nullptr ||
                 (a.write == kWriteInPlace && (a.copy_dtype == DType::bf16 || a.copy_dtype == DType::f16)));
  MIXPREC_ASSERT(!needs_state0 || a.state0 != nullptr);
  MIXPREC_ASSERT(!needs_state1 || a.state1 != nullptr);
}

template <class Scalars>
using Kernel = void (*)(const OptimArrays&, const Scalars&, std::size_t);

/// Runs `kernel` over elements [begin, begin + count) of `a`, feeding a stochastic write its
/// random bits block by block.
template <class Scalars>
void run_piece(const OptimArrays& a, const Scalars& s, std::size_t begin, std::size_t count,
               std::uint64_t stream, Kernel<Scalars> kernel) {
  if (a.write != kWriteStochastic) {
    kernel(advance(a, begin), s, count);
    return;
  }
  std::uint32_t random[kRandomBlock];
  for (std::size_t at = begin; at < begin + count; at += kRandomBlock) {
    const std::size_t block = std::min(kRandomBlock, begin + count - at);
    philox_fill(stream, at, random, block);
    OptimArrays part = advance(a, at);
    part.random = random;
    kernel(part, s, block);
  }
}

template <class Scalars>
void run(const char* op, const OptimArrays& a, const Scalars& s, std::size_t n,
         std::uint64_t stream, Kernel<Scalars> kernel) {
  if (verbose_enabled()) log_simd(op, describe(a));
  parallel_chunks(static_cast<std::int64_t>(n), kChunk, [&](std::int64_t first, std::int64_t len) {
    run_piece(a, s, static_cast<std::size_t>(first), static_cast<std::size_t>(len), stream, kernel);
  });
}

/// Every run of a batch cut into pieces of at most kChunk elements, all pieces over the threads
/// together (run_pieces.h). A piece is the same element range run() would give the kernel (or a
/// part of one), so every element gets the same bits.
template <class Scalars>
void run_batch(const char* op, const OptimBatch<Scalars>& b, Kernel<Scalars> kernel) {
  MIXPREC_ASSERT(b.size >= 0 && b.size <= kOptimBatchRuns);
  if (verbose_enabled()) {
    for (int r = 0; r < b.size; ++r) log_simd(op, describe(b.runs[r].arrays));
  }
  std::size_t total = 0;
  const std::vector<RunPiece> pieces = cut_into_pieces(
      b.size, [&](int r) { return b.runs[r].count; }, static_cast<std::size_t>(kChunk), &total);
  parallel_for(static_cast<std::int64_t>(pieces.size()),
               total >= static_cast<std::size_t>(kParallelMinWork), [&](std::int64_t k) {
                 const RunPiece& p = pieces[static_cast<std::size_t>(k)];
                 const OptimRun<Scalars>& run = b.runs[p.run];
                 run_piece(run.arrays, run.scalars, p.begin, p.count, run.rng_stream, kernel);
               });
}

}  // namespace

void sgd_update(const OptimArrays& a, const SgdScalars& s, std::size_t n, std::uint64_t rng_stream) {
  check(a, s.momentum != 0.0f, false);
  run<SgdScalars>("sgd", a, s, n, rng_stream, &sgd_update_simd);
}

void adam_update(const OptimArrays& a, const AdamScalars& s, std::size_t n,
                 std::uint64_t rng_stream) {
  check(a, true, true);
  run<AdamScalars>("adam", a, s, n, rng_stream, &adam_update_simd);
}

void sgd_update_batch(const SgdBatch& batch) {
  for (int r = 0; r < batch.size; ++r) {
    check(batch.runs[r].arrays, batch.runs[r].scalars.momentum != 0.0f, false);
  }
  run_batch<SgdScalars>("sgd", batch, &sgd_update_simd);
}

void adam_update_batch(const AdamBatch& batch) {
  for (int r = 0; r < batch.size; ++r) check(batch.runs[r].arrays, true, true);
  run_batch<AdamScalars>("adam", batch, &adam_update_simd);
}

}  // namespace mixprec::kernels::cpu
