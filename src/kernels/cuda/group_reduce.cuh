#pragma once
// Fixed-order reductions over a group of threads that share one item (a row, a channel): a warp
// (32 threads, shuffles only) or a whole block of kThreads threads (each warp's shuffles, then
// the warps' partials in warp order). The tree is the same on every run, so a reduction gives
// the same bits every time (no atomics); every thread of the group gets the result, taken from
// one place (lane 0, or the one shared sequence), so the group agrees on it bit for bit even
// where `combine` is not commutative. Included by .cu files only.
#include <cstdint>
#include <cstring>

#include "kernels/cuda/launch.cuh"

namespace mixprec::kernels::cuda {

constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kWarp = 32;

/// Applies a 32-bit shuffle to every word of a trivially copyable value.
template <class T, class Shuffle>
__device__ inline T shuffle_words(T v, Shuffle shuffle) {
  static_assert(sizeof(T) % 4 == 0, "shuffled values are made of 32-bit words");
  unsigned words[sizeof(T) / 4];
  std::memcpy(words, &v, sizeof(T));
  for (unsigned& w : words) w = shuffle(w);
  std::memcpy(&v, words, sizeof(T));
  return v;
}

/// __shfl_down_sync / __shfl_sync for any trivially copyable value.
template <class T>
__device__ inline T shuffle_down(T v, int offset) {
  return shuffle_words(v, [offset](unsigned w) { return __shfl_down_sync(kFullWarp, w, offset); });
}
template <class T>
__device__ inline T shuffle_from(T v, int lane) {
  return shuffle_words(v, [lane](unsigned w) { return __shfl_sync(kFullWarp, w, lane); });
}

/// The combination of the warp's 32 values, in every lane: a halving tree in which lane i takes
/// combine(its value, lane i + offset's), left operand the lower lane, then lane 0's result.
/// Every lane of the warp must call it.
template <class T, class Combine>
__device__ inline T warp_all_reduce(T v, Combine combine) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = combine(v, shuffle_down(v, offset));
  return shuffle_from(v, 0);
}

/// The combination of the block's values (blockDim.x = kThreads), in every thread: each warp's
/// tree, then the warps' results in warp order. Every thread of the block must call it (it
/// synchronises the block twice).
template <class T, class Combine>
__device__ inline T block_all_reduce(T v, Combine combine) {
  __shared__ T partial[kThreads / kWarp];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  v = warp_all_reduce(v, combine);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T r = partial[0];
  for (int w = 1; w < kThreads / kWarp; ++w) r = combine(r, partial[w]);
  __syncthreads();  // the next call writes partial again
  return r;
}

/// G threads (a warp or the whole block) per item; kThreads / G items per block. Kernels loop
/// over items with item() and next_item(), the same for every thread of a group, so a group
/// always reduces together.
template <int G>
struct Group {
  static_assert(G == kWarp || G == kThreads, "a group is a warp or a block");
  static constexpr int kPerBlock = kThreads / G;

  __device__ static std::int64_t lane() { return static_cast<std::int64_t>(threadIdx.x % G); }
  __device__ static std::int64_t first_item() {
    return std::int64_t{blockIdx.x} * kPerBlock + threadIdx.x / G;
  }
  __device__ static std::int64_t item_stride() { return std::int64_t{gridDim.x} * kPerBlock; }

  template <class T, class Combine>
  __device__ static T all_reduce(T v, Combine combine) {
    if constexpr (G == kWarp) {
      return warp_all_reduce(v, combine);
    } else {
      return block_all_reduce(v, combine);
    }
  }
};

/// Blocks of kThreads threads for `items` items of G threads each (capped; kernels loop over
/// the rest).
template <int G>
inline dim3 group_grid(std::int64_t items) {
  const std::int64_t blocks = (items + Group<G>::kPerBlock - 1) / Group<G>::kPerBlock;
  return dim3(static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535));
}

/// Adds; the combine of every sum (f32 or double; a pair of sums member by member).
struct Add {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

/// Two double sums reduced together (one tree for both).
struct DoublePair {
  double a, b;
};
__device__ inline DoublePair operator+(DoublePair x, DoublePair y) {
  return {x.a + y.a, x.b + y.b};
}

}  // namespace mixprec::kernels::cuda
