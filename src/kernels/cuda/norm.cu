// The CUDA batch norm and layer norm kernels. Sums accumulate in double as in the reference
// (kernels/ref/norm_ref.cpp), each in a fixed tree (group_reduce.cuh), so results are
// deterministic and match the reference's sequential double sums once rounded to f32 (to the
// last bit almost always). Every per-channel and per-element formula is the reference's own
// (kernels/spec/norm_math.h: norm_invstd, batch_norm_grad_coefs and the element formulas).
//
// Launch shapes:
//   - batch-norm reductions (statistics, gradient sums): one block per channel over its M = n*s
//     values, which are n runs of s contiguous values;
//   - batch-norm element passes: a 2-D grid, channels along x and chunks of the channel's values
//     along y, the channel's coefficients computed once per block;
//   - layer-norm forward rows: a warp per row up to 1024 values, else a block;
//   - layer-norm backward: one pass over x and dy, a block per chunk of rows, a warp per row up
//     to 256 values, else a block, dx written and each column's dweight/dbias sums kept by one
//     thread over the chunk; a second pass adds the chunks' partial rows in a fixed tree ("layer
//     norm backward" below).
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/norm.h"
#include "kernels/spec/norm_math.h"

namespace mixprec::kernels::cuda {
namespace {

using Block = Group<kThreads>;

/// Element m (m < n*s) of channel c in the contiguous [n, c, s] layout.
__device__ inline std::int64_t channel_index(BatchNormDims d, std::int64_t c, std::int64_t m) {
  return ((m / d.s) * d.c + c) * d.s + m % d.s;
}

/// Blocks along x for the channels (the kernels loop over the rest).
inline unsigned channel_blocks(std::int64_t channels) {
  return static_cast<unsigned>(channels < 65535 ? channels : 65535);
}

/// Chunks of a channel's m values along y for the element passes: about 4 values per thread.
inline unsigned element_chunks(std::int64_t m) {
  const std::int64_t chunks = (m + 4 * kThreads - 1) / (4 * kThreads);
  return static_cast<unsigned>(chunks < 1 ? 1 : (chunks > 1024 ? 1024 : chunks));
}

// ---- batch norm ----

/// Channel c's sum and the sum of squared deviations from center(sum), both in double over
/// the block's fixed-order trees (every thread of the block gets them): the two passes of the
/// statistics, written once for the forward's f32 mean and the split statistics' double one.
template <class Center>
__device__ void channel_sums(const void* x, DType tx, BatchNormDims d, std::int64_t c,
                             Center center, double& sum, double& sq) {
  const std::int64_t values = d.n * d.s;
  sum = 0.0;
  for (std::int64_t m = threadIdx.x; m < values; m += kThreads) {
    sum += load(x, tx, channel_index(d, c, m));
  }
  sum = Block::all_reduce(sum, Add{});
  const double mean = center(sum);
  sq = 0.0;
  for (std::int64_t m = threadIdx.x; m < values; m += kThreads) {
    const double dev = static_cast<double>(load(x, tx, channel_index(d, c, m))) - mean;
    sq += dev * dev;
  }
  sq = Block::all_reduce(sq, Add{});
}

/// Training statistics in f32, as batch_norm_forward writes them: the mean rounded to f32, then
/// the mean squared deviation from that f32 mean.
__global__ void batch_norm_train_stats_kernel(const void* x, DType tx, BatchNormDims d,
                                              double count, float* mean, float* var) {
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    double sum = 0.0, sq = 0.0;
    channel_sums(x, tx, d, c, [count](double s) { return double{static_cast<float>(s / count)}; },
                 sum, sq);
    const float mf = static_cast<float>(sum / count);
    if (threadIdx.x == 0) {
      mean[c] = mf;
      var[c] = static_cast<float>(sq / count);
    }
  }
}

/// The moments of batch_norm_stats, in double: mean = sum / M (0 for M = 0) and m2 = the sum of
/// squared deviations from it.
__global__ void batch_norm_moments_kernel(const void* x, DType tx, BatchNormDims d, double count,
                                          double* mean, double* m2) {
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    double sum = 0.0, sq = 0.0;
    channel_sums(x, tx, d, c, [count](double s) { return count > 0 ? s / count : 0.0; }, sum, sq);
    const double mu = count > 0 ? sum / count : 0.0;
    if (threadIdx.x == 0) {
      mean[c] = mu;
      m2[c] = sq;
    }
  }
}

/// y = batch_norm_apply(x) with the channel's mean and var (device arrays), then the fused
/// epilogue (residual add, ReLU) when asked.
__global__ void batch_norm_apply_kernel(const void* x, DType tx, BatchNormDims d,
                                        const float* mean, const float* var, const float* weight,
                                        const float* bias, float eps, void* y, DType ty,
                                        const void* residual, bool relu) {
  const std::int64_t values = d.n * d.s;
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const float mu = mean[c];
    const float invstd = norm_invstd(var[c], eps);
    const float w = weight != nullptr ? weight[c] : 1.0f;
    const float b = bias != nullptr ? bias[c] : 0.0f;
    for (std::int64_t m = std::int64_t{blockIdx.y} * kThreads + threadIdx.x; m < values;
         m += std::int64_t{gridDim.y} * kThreads) {
      const std::int64_t i = channel_index(d, c, m);
      const float z = norm_math::batch_norm_apply(load(x, tx, i), mu, invstd, w, b);
      const float r = residual != nullptr ? load(residual, ty, i) : 0.0f;
      store(y, ty, i,
            norm_math::batch_norm_epilogue(z, [ty](float u) { return round_to(ty, u); },
                                           residual != nullptr, r, relu));
    }
  }
}

/// The gradient batch norm receives at element i: dy, or dy through the fused ReLU (relu's
/// rule on the forward's output y, stored in dy's dtype).
__device__ inline float epilogue_grad(const void* dy, const void* relu_y, DType tdy,
                                      std::int64_t i) {
  const float g = load(dy, tdy, i);
  return relu_y != nullptr ? norm_math::batch_norm_relu_grad(load(relu_y, tdy, i), g) : g;
}

/// Per-channel sum(dy) and sum(dy * (x - mean)) in double; each output may be null. dweight
/// and dbias (batch_norm_backward's) come from the same sums, with var and eps.
__global__ void batch_norm_grad_sums_kernel(const void* x, DType tx, const void* dy, DType tdy,
                                            BatchNormDims d, const float* mean, double* sum_dy,
                                            double* sum_dy_xmu, const float* var, float eps,
                                            float* dweight, float* dbias, const void* relu_y,
                                            void* dresidual) {
  const std::int64_t values = d.n * d.s;
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const float mu = mean[c];
    DoublePair s{0.0, 0.0};
    for (std::int64_t m = threadIdx.x; m < values; m += kThreads) {
      const std::int64_t i = channel_index(d, c, m);
      const float gf = epilogue_grad(dy, relu_y, tdy, i);
      if (dresidual != nullptr) store(dresidual, tdy, i, gf);  // exact: dy's value or 0
      const double g = gf;
      s.a += g;
      s.b += g * (static_cast<double>(load(x, tx, i)) - mu);
    }
    s = Block::all_reduce(s, Add{});
    if (threadIdx.x == 0) {
      if (sum_dy != nullptr) sum_dy[c] = s.a;
      if (sum_dy_xmu != nullptr) sum_dy_xmu[c] = s.b;
      if (dweight != nullptr) dweight[c] = static_cast<float>(s.b) * norm_invstd(var[c], eps);
      if (dbias != nullptr) dbias[c] = static_cast<float>(s.a);
    }
  }
}

/// dx = batch_norm_grad_apply(dy, x - mean, batch_norm_grad_coefs(the channel's sums)).
__global__ void batch_norm_grad_apply_kernel(const void* x, DType tx, const void* dy, DType tdy,
                                             BatchNormDims d, const float* mean,
                                             const float* var, float eps, const float* weight,
                                             const double* sum_dy, const double* sum_dy_xmu,
                                             double count, bool training, void* dx, DType tdx,
                                             const void* relu_y) {
  const std::int64_t values = d.n * d.s;
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const float mu = mean[c];
    const BatchNormGradCoefs k =
        batch_norm_grad_coefs(var[c], eps, weight != nullptr ? weight[c] : 1.0f, sum_dy[c],
                              sum_dy_xmu[c], count, training);
    for (std::int64_t m = std::int64_t{blockIdx.y} * kThreads + threadIdx.x; m < values;
         m += std::int64_t{gridDim.y} * kThreads) {
      const std::int64_t i = channel_index(d, c, m);
      const float xmu = load(x, tx, i) - mu;
      store(dx, tdx, i, norm_math::batch_norm_grad_apply(epilogue_grad(dy, relu_y, tdy, i), xmu, k));
    }
  }
}

// ---- layer norm ----

/// The rows' layer norm. With delta set, the row is first the residual sum x + delta, rounded
/// to ts and stored in `sum` by the pass that sums it; the later passes read it back from there
/// (each lane its own elements, so no barrier is needed): add_layer_norm_forward.
template <int G>
__global__ void layer_norm_forward_kernel(const void* x, DType tx, const void* delta, DType td,
                                          void* sum_out, DType ts, std::int64_t rows,
                                          std::int64_t cols, const float* weight,
                                          const float* bias, float eps, void* y, DType ty,
                                          float* mean, float* rstd) {
  using Grp = Group<G>;
  const void* src = delta != nullptr ? sum_out : x;
  const DType tsrc = delta != nullptr ? ts : tx;
  for (std::int64_t r = Grp::first_item(); r < rows; r += Grp::item_stride()) {
    const std::int64_t base = r * cols;
    double sum = 0.0;
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      if (delta != nullptr) {
        const float v = round_to(ts, load(x, tx, base + j) + load(delta, td, base + j));
        store(sum_out, ts, base + j, v);
        sum += v;
      } else {
        sum += load(x, tx, base + j);
      }
    }
    sum = Grp::all_reduce(sum, Add{});
    const float m = cols > 0 ? static_cast<float>(sum / static_cast<double>(cols)) : 0.0f;
    double sq = 0.0;
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      const double dev = static_cast<double>(load(src, tsrc, base + j)) - m;
      sq += dev * dev;
    }
    sq = Grp::all_reduce(sq, Add{});
    const float v = cols > 0 ? static_cast<float>(sq / static_cast<double>(cols)) : 0.0f;
    const float rs = norm_invstd(v, eps);
    if (Grp::lane() == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      const float xhat = norm_math::layer_norm_xhat(load(src, tsrc, base + j), m, rs);
      const float w = weight != nullptr ? weight[j] : 1.0f;
      const float b = bias != nullptr ? bias[j] : 0.0f;
      store(y, ty, base + j, norm_math::layer_norm_apply(xhat, w, b));
    }
  }
}

// ---- layer norm backward: one pass over x and dy ----
//
// Each block takes a contiguous chunk of rows; a group (a warp, or the whole block for rows over
// 256 values) takes one row at a time, and lane l of it always the same columns j = l + G*k, so
// it can keep those columns' dweight/dbias sums over the chunk's rows in its own registers (no
// atomics: each sum has one owner, added in row order). A row is read once: its dy and x land in
// registers (the next row's are loaded before this row's sums are reduced, to hide the load
// behind the reduction), dx's two row sums are reduced in the group's fixed tree, and dx is
// written from the registers. At the end of the chunk the block writes one partial row
// (the warps' sums added in warp order), and a second kernel adds the chunks' partials in a fixed
// tree. So dx, dweight and dbias take 2 launches where they took 3 (a dx pass, a partials pass
// reading x and dy again, the finish), and x and dy are read once where they were read twice.
// The finish cannot join the main pass without a last-block-done counter, whose one block would
// then add every partial alone.
//
// Rows over 4096 values (more columns than registers) take K = 0: the column sums live in the
// chunk's partial row in global memory, still one owner each, and dx reads the row a second time
// (from L1/L2) instead of keeping it in registers.

/// layer_norm_backward's arguments and launch plan.
struct LayerNormBackwardArgs {
  const void* x;
  DType tx;
  const void* dy;
  DType tdy;
  std::int64_t rows, cols;
  const float* mean;
  const float* rstd;
  const float* weight;  ///< null: 1
  void* dx;             ///< null: not wanted
  DType tdx;
  std::int64_t chunks, rows_per_chunk;  ///< chunk c: rows [c * rows_per_chunk, + rows_per_chunk)
  DoublePair* partial;  ///< [chunks][cols] {sum dy, sum dy * xhat}; null: no dweight/dbias
};

/// Calls f(k, j) for the columns j = lane + G*k (j < cols) a lane of a group of G owns: k < K,
/// unrolled, where K > 0; every such column where K == 0 (k then counts them).
template <int G, int K, class F>
__device__ __forceinline__ void for_owned_columns(std::int64_t cols, F f) {
  const std::int64_t lane = threadIdx.x % G;
  if constexpr (K > 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::int64_t j = lane + std::int64_t{G} * k;
      if (j < cols) f(k, j);
    }
  } else {
    int k = 0;
    for (std::int64_t j = lane; j < cols; j += G) f(k++, j);
  }
}

/// dx's row sums gain element j: g = dy * w in double (an exact product), sum(g) and
/// sum(g * xhat).
__device__ inline void add_row_terms(DoublePair& s, float dy, float w, float xhat) {
  const double g = static_cast<double>(dy) * w;
  s.a += g;
  s.b += g * xhat;
}

/// Column j's sums gain row r: dbias's sum(dy) and dweight's sum(dy * xhat), in double.
__device__ inline void add_column_terms(DoublePair& s, float dy, float xhat) {
  const double g = dy;
  s.a += g;
  s.b += g * xhat;
}

__device__ inline float weight_at(const float* weight, std::int64_t j) {
  return weight != nullptr ? weight[j] : 1.0f;
}

/// The chunk's column sums (K > 0) written as its partial row: a block group's lanes write their
/// own columns; with warp groups, column j's sums of the block's warps are added in warp order
/// (staged through shared memory, one k at a time).
template <int G, int K>
__device__ __forceinline__ void write_chunk_partials(const DoublePair (&acc)[K],
                                                     std::int64_t cols, DoublePair* part) {
  if constexpr (G == kThreads) {
    for_owned_columns<G, K>(cols, [&](int k, std::int64_t j) { part[j] = acc[k]; });
  } else {
    __shared__ DoublePair stage[kThreads];
    const int lane = static_cast<int>(threadIdx.x) % G;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      stage[threadIdx.x] = acc[k];  // warp w's sums at [w * G + lane]
      __syncthreads();
      const std::int64_t j = lane + std::int64_t{G} * k;
      if (static_cast<int>(threadIdx.x) < G && j < cols) {
        DoublePair s = stage[lane];
        for (int w = 1; w < Group<G>::kPerBlock; ++w) s = s + stage[w * G + lane];
        part[j] = s;
      }
      __syncthreads();  // stage is written again for the next k (or the next chunk)
    }
  }
}

/// layer_norm_backward's pass over x and dy (see above): a group of G per row, K columns per
/// lane in registers (K == 0: wide rows, G == kThreads).
template <int G, int K>
__global__ void __launch_bounds__(kThreads) layer_norm_backward_kernel(LayerNormBackwardArgs p) {
  static_assert(K > 0 || G == kThreads, "wide rows take a block per row");
  using Grp = Group<G>;
  constexpr int kSlots = K > 0 ? K : 1;
  const std::int64_t group = threadIdx.x / G;
  float w[kSlots] = {};  // the owned columns' weights, read once
  if constexpr (K > 0) {
    for_owned_columns<G, K>(p.cols, [&](int k, std::int64_t j) { w[k] = weight_at(p.weight, j); });
  }
  for (std::int64_t chunk = blockIdx.x; chunk < p.chunks; chunk += gridDim.x) {
    const std::int64_t r0 = chunk * p.rows_per_chunk;
    const std::int64_t r1 = r0 + p.rows_per_chunk < p.rows ? r0 + p.rows_per_chunk : p.rows;
    DoublePair* part = p.partial != nullptr ? p.partial + chunk * p.cols : nullptr;
    DoublePair acc[kSlots] = {};  // K > 0: the owned columns' {sum dy, sum dy * xhat}
    if constexpr (K == 0) {
      if (part != nullptr) {
        for_owned_columns<G, K>(p.cols,
                                [&](int, std::int64_t j) { part[j] = DoublePair{0.0, 0.0}; });
      }
    }
    // K > 0: the row's dy and x in registers, the next row's loaded one row ahead.
    float next_dy[kSlots] = {}, next_x[kSlots] = {};
    const auto load_row = [&](std::int64_t r) {
      if constexpr (K > 0) {
        for_owned_columns<G, K>(p.cols, [&](int k, std::int64_t j) {
          next_dy[k] = load(p.dy, p.tdy, r * p.cols + j);
          next_x[k] = load(p.x, p.tx, r * p.cols + j);
        });
      }
    };
    if constexpr (K > 0) {
      if (r0 + group < r1) load_row(r0 + group);
    }
    for (std::int64_t r = r0 + group; r < r1; r += Grp::kPerBlock) {
      const std::int64_t base = r * p.cols;
      const float mr = p.mean[r];
      const float rr = p.rstd[r];
      float dyv[kSlots] = {}, xhat[kSlots] = {};  // K > 0: row r's dy and xhat
      if constexpr (K > 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          dyv[k] = next_dy[k];
          xhat[k] = norm_math::layer_norm_xhat(next_x[k], mr, rr);
        }
        if (r + Grp::kPerBlock < r1) load_row(r + Grp::kPerBlock);
      }
      // Row r's element j: dy, xhat and the weight, from registers (K > 0) or read (K == 0).
      const auto element = [&](int k, std::int64_t j, float& d, float& xh, float& wj) {
        if constexpr (K > 0) {
          d = dyv[k], xh = xhat[k], wj = w[k];
        } else {
          d = load(p.dy, p.tdy, base + j);
          xh = norm_math::layer_norm_xhat(load(p.x, p.tx, base + j), mr, rr);
          wj = weight_at(p.weight, j);
        }
      };
      DoublePair s{0.0, 0.0};  // dx's sum(g), sum(g * xhat)
      for_owned_columns<G, K>(p.cols, [&](int k, std::int64_t j) {
        float d, xh, wj;
        element(k, j, d, xh, wj);
        if (p.dx != nullptr) add_row_terms(s, d, wj, xh);
        if (part == nullptr) return;
        if constexpr (K > 0) {
          add_column_terms(acc[k], d, xh);
        } else {
          add_column_terms(part[j], d, xh);
        }
      });
      if (p.dx == nullptr) continue;  // the same for the whole block
      s = Grp::all_reduce(s, Add{});
      const float a = static_cast<float>(s.a / static_cast<double>(p.cols));
      const float b = static_cast<float>(s.b / static_cast<double>(p.cols));
      for_owned_columns<G, K>(p.cols, [&](int k, std::int64_t j) {
        float d, xh, wj;
        element(k, j, d, xh, wj);
        store(p.dx, p.tdx, base + j, norm_math::layer_norm_grad_apply(rr, d * wj, a, xh, b));
      });
    }
    if constexpr (K > 0) {
      // part is null for every thread or none: write_chunk_partials synchronises the block.
      if (part != nullptr) write_chunk_partials<G, K>(acc, p.cols, part);
    }
  }
}

/// dweight[j], dbias[j]: column j's chunk partials added in a fixed tree (a warp per column:
/// lane l adds chunks l, l + 32, ... in order, then the warp's tree), rounded once to f32.
__global__ void layer_norm_param_finish_kernel(const DoublePair* partial, std::int64_t chunks,
                                               std::int64_t cols, float* dweight, float* dbias) {
  using Warp = Group<kWarp>;
  for (std::int64_t j = Warp::first_item(); j < cols; j += Warp::item_stride()) {
    DoublePair s{0.0, 0.0};
    for (std::int64_t c = Warp::lane(); c < chunks; c += kWarp) s = s + partial[c * cols + j];
    s = Warp::all_reduce(s, Add{});
    if (Warp::lane() == 0) {
      if (dweight != nullptr) dweight[j] = static_cast<float>(s.b);
      if (dbias != nullptr) dbias[j] = static_cast<float>(s.a);
    }
  }
}

/// Calls f.template operator()<G, K>() with the group and the columns per lane for rows of
/// `cols` values: a warp per row up to 256 values (8 columns per lane), else the block; K
/// columns per lane in registers up to 16 (4096 values), beyond that K = 0 (the column sums in
/// the partial row).
template <class F>
void dispatch_layer_norm_columns(std::int64_t cols, F&& f) {
  if (cols <= 32) return f.template operator()<kWarp, 1>();
  if (cols <= 64) return f.template operator()<kWarp, 2>();
  if (cols <= 128) return f.template operator()<kWarp, 4>();
  if (cols <= 256) return f.template operator()<kWarp, 8>();
  if (cols <= 512) return f.template operator()<kThreads, 2>();
  if (cols <= 1024) return f.template operator()<kThreads, 4>();
  if (cols <= 2048) return f.template operator()<kThreads, 8>();
  if (cols <= 4096) return f.template operator()<kThreads, 16>();
  return f.template operator()<kThreads, 0>();
}

/// At most 512 partial rows to add (512 * cols * 16 bytes of scratch).
constexpr std::int64_t kMaxChunks = 512;

/// The chunks of `rows` rows for groups of G. With column sums: at least 8 rows per warp where
/// the block's groups are warps, 32 rows where a block takes a row (enough to pay for writing a
/// partial row), at most kMaxChunks chunks; at least one chunk (rows == 0 then writes zeros).
/// dx alone: one row per group, as the separate dx kernel had it.
template <int G>
std::int64_t layer_norm_chunks(std::int64_t rows, bool sums) {
  constexpr std::int64_t kPerBlock = Group<G>::kPerBlock;
  const std::int64_t min_rows = sums ? (G == kWarp ? 8 * kPerBlock : 32) : kPerBlock;
  const std::int64_t chunks = (rows + min_rows - 1) / min_rows;
  if (chunks < 1) return 1;
  return sums && chunks > kMaxChunks ? kMaxChunks : chunks;
}

/// Rows of up to 1024 values: a warp each; longer: a block each.
bool warp_rows(std::int64_t cols) { return cols <= 1024; }

/// Launches layer_norm_forward_kernel (delta null: a plain layer norm).
void launch_layer_norm_forward(const char* op, const void* x, DType tx, const void* delta,
                               DType td, void* sum, DType ts, std::int64_t rows,
                               std::int64_t cols, const float* weight, const float* bias,
                               float eps, void* y, DType ty, float* mean, float* rstd) {
  detail::check_layer_norm_args(op, rows, cols, eps);
  if (rows == 0) return;  // cols == 0 still writes each row's mean and rstd
  if (warp_rows(cols)) {
    layer_norm_forward_kernel<kWarp><<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(
        x, tx, delta, td, sum, ts, rows, cols, weight, bias, eps, y, ty, mean, rstd);
  } else {
    layer_norm_forward_kernel<kThreads><<<group_grid<kThreads>(rows), kThreads, 0, stream()>>>(
        x, tx, delta, td, sum, ts, rows, cols, weight, bias, eps, y, ty, mean, rstd);
  }
  check_launch(op);
}

}  // namespace

void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype, const void* residual, bool relu) {
  const char* op = "batch_norm";
  detail::check_batch_norm_args(op, d, eps, training);
  if (d.c == 0) return;
  const std::int64_t values = d.n * d.s;
  if (training) {
    batch_norm_train_stats_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
        x, x_dtype, d, static_cast<double>(values), mean, var);
    check_launch(op);
  }
  if (values == 0) return;
  const dim3 g(channel_blocks(d.c), element_chunks(values));
  batch_norm_apply_kernel<<<g, kThreads, 0, stream()>>>(x, x_dtype, d, mean, var, weight, bias,
                                                        eps, y, y_dtype, residual, relu);
  check_launch(op);
}

void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias, const void* relu_y, void* dresidual) {
  const char* op = "batch_norm_backward";
  detail::check_batch_norm_args(op, d, eps, training);
  if (d.c == 0 ||
      (dx == nullptr && dweight == nullptr && dbias == nullptr && dresidual == nullptr)) {
    return;
  }
  const std::int64_t values = d.n * d.s;
  const bool want_dx = dx != nullptr && values > 0;
  const auto channels = static_cast<std::size_t>(d.c);
  Scratch sums(want_dx ? 2 * channels * sizeof(double) : 0);
  double* sum_dy = want_dx ? sums.as<double>() : nullptr;
  double* sum_dy_xmu = want_dx ? sums.as<double>() + channels : nullptr;
  batch_norm_grad_sums_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
      x, x_dtype, dy, dy_dtype, d, mean, sum_dy, sum_dy_xmu, var, eps, dweight, dbias, relu_y,
      dresidual);
  check_launch(op);
  if (!want_dx) return;
  const dim3 g(channel_blocks(d.c), element_chunks(values));
  batch_norm_grad_apply_kernel<<<g, kThreads, 0, stream()>>>(
      x, x_dtype, dy, dy_dtype, d, mean, var, eps, weight, sum_dy, sum_dy_xmu,
      static_cast<double>(values), training, dx, dx_dtype, relu_y);
  check_launch(op);
}

void batch_norm_stats(const void* x, DType x_dtype, BatchNormDims d, double* mean, double* m2) {
  const char* op = "batch_norm_stats";
  detail::check_batch_norm_args(op, d, 0.0f, false);
  if (d.c == 0) return;
  batch_norm_moments_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
      x, x_dtype, d, static_cast<double>(d.n * d.s), mean, m2);
  check_launch(op);
}

void batch_norm_backward_reduce(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                                BatchNormDims d, const float* mean, double* sum_dy,
                                double* sum_dy_xmu) {
  const char* op = "batch_norm_backward_reduce";
  detail::check_batch_norm_args(op, d, 0.0f, false);
  if (d.c == 0) return;
  batch_norm_grad_sums_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
      x, x_dtype, dy, dy_dtype, d, mean, sum_dy, sum_dy_xmu, nullptr, 0.0f, nullptr, nullptr,
      nullptr, nullptr);
  check_launch(op);
}

void batch_norm_backward_elemt(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                               BatchNormDims d, const float* mean, const float* var, float eps,
                               const float* weight, const double* sum_dy,
                               const double* sum_dy_xmu, double count, void* dx, DType dx_dtype) {
  const char* op = "batch_norm_backward_elemt";
  detail::check_batch_norm_args(op, d, eps, false);
  const std::int64_t values = d.n * d.s;
  if (d.c == 0 || values == 0) return;
  const dim3 g(channel_blocks(d.c), element_chunks(values));
  batch_norm_grad_apply_kernel<<<g, kThreads, 0, stream()>>>(x, x_dtype, dy, dy_dtype, d, mean,
                                                             var, eps, weight, sum_dy,
                                                             sum_dy_xmu, count, true, dx,
                                                             dx_dtype, nullptr);
  check_launch(op);
}

void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd) {
  launch_layer_norm_forward("layer_norm", x, x_dtype, nullptr, x_dtype, nullptr, x_dtype, rows,
                            cols, weight, bias, eps, y, y_dtype, mean, rstd);
}

void add_layer_norm_forward(const void* x, DType x_dtype, const void* delta, DType delta_dtype,
                            std::int64_t rows, std::int64_t cols, const float* weight,
                            const float* bias, float eps, void* sum, DType sum_dtype, void* y,
                            DType y_dtype, float* mean, float* rstd) {
  launch_layer_norm_forward("add_layer_norm", x, x_dtype, delta, delta_dtype, sum, sum_dtype,
                            rows, cols, weight, bias, eps, y, y_dtype, mean, rstd);
}

void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  const char* op = "layer_norm_backward";
  detail::check_layer_norm_args(op, rows, cols, 0.0f);
  const bool sums = dweight != nullptr || dbias != nullptr;
  if (cols == 0 || (!sums && (dx == nullptr || rows == 0))) return;
  dispatch_layer_norm_columns(cols, [&]<int G, int K>() {
    const std::int64_t chunks = layer_norm_chunks<G>(rows, sums);
    const auto partial_rows = static_cast<std::size_t>(sums ? chunks : 0);
    Scratch partial(partial_rows * static_cast<std::size_t>(cols) * sizeof(DoublePair), op);
    LayerNormBackwardArgs p{};
    p.x = x, p.tx = x_dtype, p.dy = dy, p.tdy = dy_dtype, p.rows = rows, p.cols = cols;
    p.mean = mean, p.rstd = rstd, p.weight = weight, p.dx = dx, p.tdx = dx_dtype;
    p.chunks = chunks;
    p.rows_per_chunk = (rows + chunks - 1) / chunks;
    p.partial = partial.as<DoublePair>();  // null without sums
    const auto blocks = static_cast<unsigned>(chunks < 65535 ? chunks : 65535);
    layer_norm_backward_kernel<G, K><<<blocks, kThreads, 0, stream()>>>(p);
    check_launch(op);
    if (!sums) return;
    layer_norm_param_finish_kernel<<<group_grid<kWarp>(cols), kThreads, 0, stream()>>>(
        p.partial, chunks, cols, dweight, dbias);
    check_launch(op);
  });
}

}  // namespace mixprec::kernels::cuda
