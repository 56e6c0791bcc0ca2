// The CUDA reductions of a [outer, n, inner] buffer over its middle axis, f32 accumulators as in
// the reference. Three launch shapes, chosen from the shape alone (so a call gives the same bits
// every run):
//   - n <= 32: one thread per output adding in index order: the reference's own order, its bits;
//   - inner == 1 (rows): a warp (n <= 1024) or a block per row, each thread adding every G-th
//     element, then a fixed tree (group_reduce.cuh);
//   - inner > 1 (columns): 32 neighbouring outputs per block (coalesced loads) with 8 threads
//     each adding every 8th element, then the 8 partials in a fixed order; a block per output
//     when there are too few outputs to fill blocks that way;
//   - few outputs over long rows (a gradient norm over 38M elements, say): each row in chunks,
//     a block per (output, chunk) writing its partial state, then a block per output combining
//     the chunks' partials in a fixed tree. The chunk count follows from the shape, so the bits
//     do too; one block per row would leave all but one multiprocessor idle (the first GPU run:
//     GPT-2-small's gradient norm took 94 ms of a 216 ms step).
// Sums therefore differ from the reference's sequential order by rounding only (the
// conformance tolerance). max, min and amax give the reference's bits in every shape: each
// partial carries the index of the element it kept, and partials combine as the sequential
// nan_max/nan_min would have (the first NaN; else the last of equal maxima, which decides
// -0 against +0).
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/reduce.h"
#include "kernels/spec/nan_minmax.h"

namespace mixprec::kernels::cuda {
namespace {

/// A running sum (sum, mean, norm1, norm2): f32, partials added.
template <ReduceOp Op>
struct SumLike {
  using State = float;
  __device__ static State init() { return 0.0f; }
  __device__ static State add(State acc, float x, std::int64_t) {
    if constexpr (Op == ReduceOp::norm1) {
      return acc + fabsf(x);
    } else if constexpr (Op == ReduceOp::norm2) {
      return acc + x * x;
    } else {
      return acc + x;
    }
  }
  __device__ static State combine(State a, State b) { return a + b; }
  __device__ static float result(State acc, std::int64_t n) {
    if constexpr (Op == ReduceOp::mean) {
      return acc / static_cast<float>(n);
    } else if constexpr (Op == ReduceOp::norm2) {
      return sqrtf(acc);
    } else {
      return acc;
    }
  }
};

/// The element a max/min/amax keeps so far: its value and index (-1: the identity, before
/// every element, as the reference's initial accumulator).
struct Kept {
  float v;
  std::int64_t k;
};

/// max, min, amax: the reference's nan_max/nan_min steps, remembering the kept element's index.
template <ReduceOp Op>
struct MaxLike {
  using State = Kept;
  __device__ static bool keeps_b(float a, float b) {
    if constexpr (Op == ReduceOp::min) {
      return kernels::nan_min_keeps_b(a, b);
    } else {
      return kernels::nan_max_keeps_b(a, b);
    }
  }
  __device__ static State init() {
    if constexpr (Op == ReduceOp::max) {
      return {-INFINITY, -1};
    } else if constexpr (Op == ReduceOp::min) {
      return {INFINITY, -1};
    } else {
      return {0.0f, -1};
    }
  }
  /// Elements come in increasing index order within one thread.
  __device__ static State add(State acc, float x, std::int64_t k) {
    const float v = Op == ReduceOp::amax ? fabsf(x) : x;
    return keeps_b(acc.v, v) ? State{v, k} : acc;
  }
  /// Partials over interleaved index sets: the sequential reduction of their union keeps what
  /// the earlier-indexed one would keep when it met the later one.
  __device__ static State combine(State a, State b) {
    if (a.k < b.k) return keeps_b(a.v, b.v) ? b : a;
    return keeps_b(b.v, a.v) ? a : b;
  }
  __device__ static float result(State acc, std::int64_t) { return acc.v; }
};

template <class R>
struct Combine {
  template <class S>
  __device__ S operator()(S a, S b) const { return R::combine(a, b); }
};

/// One thread per output, elements in index order (the reference's loop).
template <class R>
__global__ void reduce_sequential_kernel(const void* in, DType din, std::int64_t outer,
                                         std::int64_t n, std::int64_t inner, void* out,
                                         DType dout) {
  MIXPREC_GRID_STRIDE(j, outer * inner) {
    const std::int64_t base = (j / inner) * n * inner + j % inner;
    typename R::State acc = R::init();
    for (std::int64_t k = 0; k < n; ++k) acc = R::add(acc, load(in, din, base + k * inner), k);
    store(out, dout, j, R::result(acc, n));
  }
}

/// G threads per output j = (o, i); thread t adds elements k = t, t + G, ...
template <class R, int G>
__global__ void reduce_group_kernel(const void* in, DType din, std::int64_t outer,
                                    std::int64_t n, std::int64_t inner, void* out, DType dout) {
  using Grp = Group<G>;
  for (std::int64_t j = Grp::first_item(); j < outer * inner; j += Grp::item_stride()) {
    const std::int64_t base = (j / inner) * n * inner + j % inner;
    typename R::State acc = R::init();
    for (std::int64_t k = Grp::lane(); k < n; k += G) {
      acc = R::add(acc, load(in, din, base + k * inner), k);
    }
    acc = Grp::all_reduce(acc, Combine<R>{});
    if (Grp::lane() == 0) store(out, dout, j, R::result(acc, n));
  }
}

constexpr int kColumnOutputs = 32;                       // outputs per block (threadIdx.x)
constexpr int kColumnLanes = kThreads / kColumnOutputs;  // threads per output (threadIdx.y)

/// Block (32, 8): outputs j = 32 * block + threadIdx.x, each summed by the 8 threads of its
/// column over k = threadIdx.y, threadIdx.y + 8, ...; the 8 partials then in threadIdx.y order.
template <class R>
__global__ void reduce_columns_kernel(const void* in, DType din, std::int64_t outer,
                                      std::int64_t n, std::int64_t inner, void* out,
                                      DType dout) {
  using State = typename R::State;
  __shared__ State partial[kColumnLanes][kColumnOutputs];
  const std::int64_t outputs = outer * inner;
  for (std::int64_t j0 = std::int64_t{blockIdx.x} * kColumnOutputs; j0 < outputs;
       j0 += std::int64_t{gridDim.x} * kColumnOutputs) {
    const std::int64_t j = j0 + threadIdx.x;
    State acc = R::init();
    if (j < outputs) {
      const std::int64_t base = (j / inner) * n * inner + j % inner;
      for (std::int64_t k = threadIdx.y; k < n; k += kColumnLanes) {
        acc = R::add(acc, load(in, din, base + k * inner), k);
      }
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < outputs) {
      for (int y = 1; y < kColumnLanes; ++y) acc = R::combine(acc, partial[y][threadIdx.x]);
      store(out, dout, j, R::result(acc, n));
    }
    __syncthreads();  // partial is written again by the next chunk
  }
}

/// Split rows, first pass: block (j, c) reduces elements k in [c * len, (c + 1) * len) of
/// output j, thread t every kThreads-th from t, then a block tree; its state goes to
/// partial[j * chunks + c].
template <class R>
__global__ void reduce_chunks_kernel(const void* in, DType din, std::int64_t n,
                                     std::int64_t inner, std::int64_t len,
                                     typename R::State* partial) {
  const std::int64_t j = blockIdx.y, c = blockIdx.x, chunks = gridDim.x;
  const std::int64_t base = (j / inner) * n * inner + j % inner;
  const std::int64_t end = (c + 1) * len < n ? (c + 1) * len : n;
  typename R::State acc = R::init();
  for (std::int64_t k = c * len + threadIdx.x; k < end; k += kThreads) {
    acc = R::add(acc, load(in, din, base + k * inner), k);
  }
  acc = Group<kThreads>::all_reduce(acc, Combine<R>{});
  if (threadIdx.x == 0) partial[j * chunks + c] = acc;
}

/// Split rows, second pass: block j combines output j's chunk partials (thread t every
/// kThreads-th from t, then the tree; chunks are in index order, which max/min rely on).
template <class R>
__global__ void reduce_chunk_partials_kernel(const typename R::State* partial,
                                             std::int64_t chunks, std::int64_t n, void* out,
                                             DType dout) {
  const std::int64_t j = blockIdx.x;
  typename R::State acc = R::init();  // combines as the identity, as in the other kernels
  for (std::int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    acc = R::combine(acc, partial[j * chunks + c]);
  }
  acc = Group<kThreads>::all_reduce(acc, Combine<R>{});
  if (threadIdx.x == 0) store(out, dout, j, R::result(acc, n));
}

/// Chunks per output for the split path: about 1024 blocks in all, each at least 8192
/// elements; 1 (no split) where the usual shapes already fill the GPU.
inline std::int64_t split_chunks(std::int64_t outputs, std::int64_t n) {
  constexpr std::int64_t kMinChunk = 8192, kTargetBlocks = 1024;
  if (outputs >= 256 || n < 4 * kMinChunk) return 1;
  const std::int64_t by_size = n / kMinChunk;
  const std::int64_t by_blocks = kTargetBlocks / outputs;
  const std::int64_t chunks = by_size < by_blocks ? by_size : by_blocks;
  return chunks > 1 ? chunks : 1;
}

/// A reduce call's operands, as the kernels take them.
struct Call {
  const void* in;
  DType din;
  std::int64_t outer, n, inner;
  void* out;
  DType dout;
};

template <class R>
void launch(ReduceOp op, const Call& c) {
  const std::int64_t outputs = c.outer * c.inner;
  if (const std::int64_t chunks = split_chunks(outputs, c.n); chunks > 1) {
    using State = typename R::State;
    const std::int64_t len = (c.n + chunks - 1) / chunks;
    Scratch partial(static_cast<std::size_t>(outputs * chunks) * sizeof(State));
    reduce_chunks_kernel<R><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(outputs)),
                              kThreads, 0, stream()>>>(c.in, c.din, c.n, c.inner, len,
                                                       partial.as<State>());
    reduce_chunk_partials_kernel<R><<<static_cast<unsigned>(outputs), kThreads, 0, stream()>>>(
        partial.as<State>(), chunks, c.n, c.out, c.dout);
  } else if (c.n <= kWarp) {
    reduce_sequential_kernel<R><<<grid(outputs), kThreads, 0, stream()>>>(
        c.in, c.din, c.outer, c.n, c.inner, c.out, c.dout);
  } else if (c.inner == 1 && c.n <= 1024) {
    reduce_group_kernel<R, kWarp><<<group_grid<kWarp>(outputs), kThreads, 0, stream()>>>(
        c.in, c.din, c.outer, c.n, c.inner, c.out, c.dout);
  } else if (c.inner == 1 || outputs < 2 * kColumnOutputs) {
    reduce_group_kernel<R, kThreads><<<group_grid<kThreads>(outputs), kThreads, 0, stream()>>>(
        c.in, c.din, c.outer, c.n, c.inner, c.out, c.dout);
  } else {
    const std::int64_t blocks = (outputs + kColumnOutputs - 1) / kColumnOutputs;
    const dim3 g(static_cast<unsigned>(blocks < 65535 ? blocks : 65535));
    reduce_columns_kernel<R><<<g, dim3(kColumnOutputs, kColumnLanes), 0, stream()>>>(
        c.in, c.din, c.outer, c.n, c.inner, c.out, c.dout);
  }
  check_launch(name(op));
}

// ---- multi-tensor: every run of a ReduceBatch to one value, in two launches ----

/// Elements one block of the first pass reduces (the split path's smallest chunk).
constexpr std::int64_t kBatchChunk = 8192;

struct ReduceLaunch {
  ReduceBatch batch;
  BlockPlan<kReduceBatchRuns> plan;
};

/// First pass: block b reduces its chunk of its run (thread t every kThreads-th element from t,
/// then the block tree) into partial[b].
template <class R>
__global__ void reduce_batch_chunks_kernel(const __grid_constant__ ReduceLaunch l,
                                           typename R::State* partial) {
  const int b = static_cast<int>(blockIdx.x);
  const int r = l.plan.run_of(b);
  const ReduceRun& run = l.batch.runs[r];
  const std::int64_t begin = (b - l.plan.first_block[r]) * kBatchChunk;
  const std::int64_t end = begin + kBatchChunk < run.count ? begin + kBatchChunk : run.count;
  typename R::State acc = R::init();
  for (std::int64_t k = begin + threadIdx.x; k < end; k += kThreads) {
    acc = R::add(acc, load(run.data, run.dtype, k), k);
  }
  acc = Group<kThreads>::all_reduce(acc, Combine<R>{});
  if (threadIdx.x == 0) partial[b] = acc;
}

/// Second pass: block r combines run r's chunk partials (in index order, which max/min rely on;
/// none for an empty run: the identity) and writes out[r].
template <class R>
__global__ void reduce_batch_combine_kernel(const __grid_constant__ ReduceLaunch l,
                                            const typename R::State* partial) {
  const int r = static_cast<int>(blockIdx.x);
  const int first = l.plan.first_block[r], last = l.plan.first_block[r + 1];
  typename R::State acc = R::init();
  for (int c = first + static_cast<int>(threadIdx.x); c < last; c += kThreads) {
    acc = R::combine(acc, partial[c]);
  }
  acc = Group<kThreads>::all_reduce(acc, Combine<R>{});
  if (threadIdx.x == 0) l.batch.out[r] = R::result(acc, l.batch.runs[r].count);
}

template <class R>
void launch_batch(const ReduceBatch& batch) {
  ReduceLaunch l;
  l.batch = batch;
  const std::int64_t blocks = l.plan.plan(
      batch.size, [&](int r) { return batch.runs[r].count; }, kBatchChunk, "reduce_batch");
  using State = typename R::State;
  Scratch partial(static_cast<std::size_t>(blocks > 0 ? blocks : 1) * sizeof(State));
  if (blocks > 0) {
    reduce_batch_chunks_kernel<R><<<static_cast<unsigned>(blocks), kThreads, 0, stream()>>>(
        l, partial.as<State>());
  }
  reduce_batch_combine_kernel<R><<<static_cast<unsigned>(batch.size), kThreads, 0, stream()>>>(
      l, partial.as<State>());
  check_launch("reduce_batch");
}

}  // namespace

void reduce_batch(const ReduceBatch& batch) {
  if (batch.size == 0) return;
  for (int r = 0; r < batch.size; ++r) {
    const ReduceRun& run = batch.runs[r];
    detail::check_reduce_args(batch.op, 1, run.count, 1);
    MIXPREC_CHECK(!is_storage_only(run.dtype), BackendError, "reduce_batch",
                  "cuda has no reduce_batch kernel for " << name(run.dtype)
                      << " (run " << r << "); reduce fp8 data after converting it");
  }
  switch (batch.op) {
    case ReduceOp::sum: return launch_batch<SumLike<ReduceOp::sum>>(batch);
    case ReduceOp::mean: return launch_batch<SumLike<ReduceOp::mean>>(batch);
    case ReduceOp::norm1: return launch_batch<SumLike<ReduceOp::norm1>>(batch);
    case ReduceOp::norm2: return launch_batch<SumLike<ReduceOp::norm2>>(batch);
    case ReduceOp::max: return launch_batch<MaxLike<ReduceOp::max>>(batch);
    case ReduceOp::min: return launch_batch<MaxLike<ReduceOp::min>>(batch);
    case ReduceOp::amax: return launch_batch<MaxLike<ReduceOp::amax>>(batch);
  }
}

void reduce(ReduceOp op, const void* in, DType in_dtype, std::int64_t outer, std::int64_t n,
            std::int64_t inner, void* out, DType out_dtype) {
  detail::check_reduce_args(op, outer, n, inner);
  if (outer == 0 || inner == 0) return;
  const Call c{in, in_dtype, outer, n, inner, out, out_dtype};
  switch (op) {
    case ReduceOp::sum: return launch<SumLike<ReduceOp::sum>>(op, c);
    case ReduceOp::mean: return launch<SumLike<ReduceOp::mean>>(op, c);
    case ReduceOp::norm1: return launch<SumLike<ReduceOp::norm1>>(op, c);
    case ReduceOp::norm2: return launch<SumLike<ReduceOp::norm2>>(op, c);
    case ReduceOp::max: return launch<MaxLike<ReduceOp::max>>(op, c);
    case ReduceOp::min: return launch<MaxLike<ReduceOp::min>>(op, c);
    case ReduceOp::amax: return launch<MaxLike<ReduceOp::amax>>(op, c);
  }
}

}  // namespace mixprec::kernels::cuda
