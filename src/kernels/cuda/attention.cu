// Scaled dot-product attention on the GPU, flash-attention-2 style, in plain f32 (CUDA cores, no
// Tensor-Core code). It serves calls with an additive mask and tiny shapes; the others go
// through batched GEMMs (attention_gemm.cu), several times faster. Here the softmax and every
// sum are f32, operands are widened to f32 as they are staged, and each output is rounded once
// to the storage dtype. No score matrix ever exists in memory:
//  - forward, one thread block per (batch-head, block of 64 query rows, 128 output columns):
//    every block of 64 keys is scored, masked and folded into the rows' running max and sum
//    (the online softmax: a grown max rescales the sum and the output accumulator by
//    e^(m_old - m_new)); the block writes its output columns, and lse = m + log(l).
//  - backward, without atomics: D_i = dout_i . out_i into scratch (one warp per row); then one
//    block per (batch-head, key block, 128 gradient columns) walks the query blocks in order,
//    recomputes p = exp(s - lse) and accumulates dk and dv of its keys; then one block per
//    (batch-head, query block, 128 columns) walks the key blocks in order for dq. Every gradient
//    element belongs to one thread, which sums in a fixed order: the bits never depend on
//    scheduling.
// The causal cut, the mask and the dropout decision are the reference's own functions
// (spec/attention_rules.h, built for the device too); the RNG is regenerated from its counter in
// both passes, nothing is stored. Head sizes are unbounded: the head dimension is staged 64
// columns at a time and output columns beyond 128 go to further blocks (which recompute the
// scores; head sizes up to 128 need one).
//
// Tiles: 256 threads see a 64 x 64 tile as 16 x 16 threads, each owning the 4 x 4 elements
// (ty + 16a, tx + 16c); the 16 threads of a tile row are one half-warp, so row reductions are
// xor shuffles among them. Two 64 x 65 f32 shared buffers (33,280 bytes, static) stage operands;
// the padding column keeps the column-wise reads of dot_tile free of bank conflicts.
#include <cstdint>
#include <string>

#include "kernels/attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/attention_flash.h"
#include "kernels/cuda/attention_gemm.h"
#include "kernels/cuda/attention_path.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/spec/attention_rules.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cuda {
namespace {

constexpr int kTile = 64;             ///< query rows, keys and head columns per tile
constexpr int kLd = kTile + 1;        ///< shared row pitch (the bank-conflict padding)
constexpr int kSide = 16;             ///< threads along each side of a tile
constexpr int kSub = kTile / kSide;   ///< elements per thread along each side
constexpr int kAttnThreads = kSide * kSide;
constexpr int kOutTiles = 2;          ///< 64-column output tiles per block: 128 columns
constexpr std::int64_t kOutWidth = kOutTiles * kTile;

using Shared = float (*)[kLd];
using Regs = float[kSub][kSub];
using OutRegs = float[kOutTiles][kSub][kSub];

/// Rows [row0, row0 + 64) of one batch-head's [rows, width] row-major matrix in a dtype buffer;
/// first is the element offset of the batch-head's row 0. Rows past `rows` read as zeros.
struct RowTile {
  const void* data;
  DType dtype;
  std::int64_t first, row0, rows, width, stride;  ///< row r starts at first + r * stride
};

/// The tile of rows row0.. of batch-head b of an operand with layout l (attention.h).
__device__ __forceinline__ RowTile tile_of(const void* data, const AttentionDesc& d,
                                           const AttentionLayout& l, std::int64_t b,
                                           std::int64_t row0, std::int64_t rows,
                                           std::int64_t width) {
  const std::int64_t first = detail::row_start(d, l, b, 0, rows, width);
  const std::int64_t stride = detail::row_start(d, l, b, 1, rows, width) - first;
  return RowTile{data, d.dtype, first, row0, rows, width, stride};
}

__device__ __forceinline__ int tile_y() { return static_cast<int>(threadIdx.x) / kSide; }
__device__ __forceinline__ int tile_x() { return static_cast<int>(threadIdx.x) % kSide; }

/// Widens columns [col0, col0 + 64) of m into tile; zeros outside the matrix, so padded rows
/// and columns add nothing to the sums that read them.
__device__ __forceinline__ void stage(Shared tile, const RowTile& m, std::int64_t col0) {
  for (int e = static_cast<int>(threadIdx.x); e < kTile * kTile; e += kAttnThreads) {
    const int r = e / kTile, c = e % kTile;
    const std::int64_t row = m.row0 + r, col = col0 + c;
    tile[r][c] = row < m.rows && col < m.width
                     ? load(m.data, m.dtype, m.first + row * m.stride + col)
                     : 0.0f;
  }
}

/// acc[a][c] += sum_{k < cols} a[ty + 16a][k] * b[tx + 16c][k]: a tile of A B^T, both
/// row-major (cols < 64 on the last columns of a head size that is no multiple of 64).
__device__ __forceinline__ void dot_tile(const Shared a, const Shared b, int cols, Regs& acc) {
  const int ty = tile_y(), tx = tile_x();
  #pragma unroll 8
  for (int k = 0; k < cols; ++k) {
    float ar[kSub], br[kSub];
    #pragma unroll
    for (int i = 0; i < kSub; ++i) {
      ar[i] = a[ty + kSide * i][k];
      br[i] = b[tx + kSide * i][k];
    }
    #pragma unroll
    for (int i = 0; i < kSub; ++i) {
      #pragma unroll
      for (int j = 0; j < kSub; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
    }
  }
}

/// acc[a][c] += sum_j p[ty + 16a][j] * v[j][tx + 16c]: a tile of P V.
__device__ __forceinline__ void product_tile(const Shared p, const Shared v, Regs& acc) {
  const int ty = tile_y(), tx = tile_x();
  #pragma unroll 8
  for (int j = 0; j < kTile; ++j) {
    float pr[kSub], vr[kSub];
    #pragma unroll
    for (int i = 0; i < kSub; ++i) {
      pr[i] = p[ty + kSide * i][j];
      vr[i] = v[j][tx + kSide * i];
    }
    #pragma unroll
    for (int i = 0; i < kSub; ++i) {
      #pragma unroll
      for (int c = 0; c < kSub; ++c) acc[i][c] = fmaf(pr[i], vr[c], acc[i][c]);
    }
  }
}

// Every helper below that touches shared memory starts by writing it and ends with a barrier
// after its last read, so they chain without further synchronisation.

/// acc = a's rows . b's rows over the whole width (a tile of A B^T), staged 64 columns at a time.
__device__ __forceinline__ void gram(Regs& acc, Shared sa, Shared sb, const RowTile& a,
                                     const RowTile& b) {
  #pragma unroll
  for (int i = 0; i < kSub; ++i) {
    #pragma unroll
    for (int c = 0; c < kSub; ++c) acc[i][c] = 0.0f;
  }
  for (std::int64_t col0 = 0; col0 < a.width; col0 += kTile) {
    stage(sa, a, col0);
    stage(sb, b, col0);
    __syncthreads();
    const std::int64_t left = a.width - col0;
    dot_tile(sa, sb, left < kTile ? static_cast<int>(left) : kTile, acc);
    __syncthreads();
  }
}

/// acc[t] += coef m[:, out_col0 + 64t ..]: the coefficient tile (rows = output rows, columns =
/// m's rows) times the output columns of m this block owns. Nothing when it owns none of them.
__device__ __forceinline__ void accumulate(OutRegs& acc, const Regs& coef, Shared sa, Shared sb,
                                           const RowTile& m, std::int64_t out_col0) {
  if (out_col0 >= m.width) return;  // block-uniform: the barriers below are reached by all
  const int ty = tile_y(), tx = tile_x();
  #pragma unroll
  for (int i = 0; i < kSub; ++i) {
    #pragma unroll
    for (int c = 0; c < kSub; ++c) sa[ty + kSide * i][tx + kSide * c] = coef[i][c];
  }
  #pragma unroll
  for (int t = 0; t < kOutTiles; ++t) {
    const std::int64_t col0 = out_col0 + t * kTile;
    if (col0 < m.width) {  // block-uniform
      stage(sb, m, col0);
      __syncthreads();
      product_tile(sa, sb, acc[t]);
      __syncthreads();
    }
  }
}

/// The max over the 16 lanes of a tile row (a butterfly: every lane ends with the same value).
/// NaN never enters: the running max starts at -inf and takes only values greater than it.
__device__ __forceinline__ float row_max(float x) {
  for (int lanes = kSide / 2; lanes > 0; lanes /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, x, lanes);
    x = o > x ? o : x;
  }
  return x;
}

/// The sum over the 16 lanes of a tile row; the butterfly adds the same two partials on both
/// lanes of each pair (a + b and b + a are the same float), so every lane ends with equal bits.
__device__ __forceinline__ float row_sum(float x) {
  for (int lanes = kSide / 2; lanes > 0; lanes /= 2) x += __shfl_xor_sync(0xffffffffu, x, lanes);
  return x;
}

/// Keys a query block [i0, i0 + 64) can see: all, or under the causal cut (j > i masked, the
/// diagonal anchored top-left as in the reference) up to its last row.
__device__ __forceinline__ std::int64_t visible_keys(const AttentionDesc& d, std::int64_t i0) {
  if (!d.causal) return d.tk;
  const std::int64_t last = i0 + kTile < d.tq ? i0 + kTile : d.tq;  // one past the last row
  return last < d.tk ? last : d.tk;
}

struct BlockTask {
  std::int64_t b, row0, out_col0;
};

/// Block blockIdx.x of a grid over (batch-head, row block, column group), column group fastest
/// (the blocks that share a row block's operands run together).
__device__ __forceinline__ BlockTask block_task(std::int64_t row_blocks, std::int64_t col_groups) {
  const std::int64_t task = blockIdx.x;
  const std::int64_t rows = task / col_groups;
  return {rows / row_blocks, rows % row_blocks * kTile, task % col_groups * kOutWidth};
}

// Two blocks per SM: ptxas then fits the forward in 128 registers without spilling.
__global__ void __launch_bounds__(kAttnThreads, 2)
    forward_kernel(AttentionDesc d, const void* q, const void* k, const void* v, void* out,
                   float* lse, std::int64_t row_blocks, std::int64_t col_groups) {
  __shared__ float sa[kTile][kLd], sb[kTile][kLd];
  const BlockTask task = block_task(row_blocks, col_groups);
  const std::int64_t b = task.b, i0 = task.row0;
  const int ty = tile_y(), tx = tile_x();
  const RowTile qt = tile_of(q, d, d.q_rows, b, i0, d.tq, d.d);
  OutRegs acc = {};
  float m[kSub], l[kSub];  // running max (same on the row's 16 lanes) and this lane's share of l
  #pragma unroll
  for (int i = 0; i < kSub; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  const std::int64_t keys = visible_keys(d, i0);
  for (std::int64_t j0 = 0; j0 < keys; j0 += kTile) {
    const RowTile kt = tile_of(k, d, d.k_rows, b, j0, d.tk, d.d);
    const RowTile vt = tile_of(v, d, d.v_rows, b, j0, d.tk, d.dv);
    Regs s;
    gram(s, sa, sb, qt, kt);
    #pragma unroll
    for (int i = 0; i < kSub; ++i) {
      const std::int64_t row = i0 + ty + kSide * i;
      float mx = m[i];
      #pragma unroll
      for (int c = 0; c < kSub; ++c) {
        const std::int64_t key = j0 + tx + kSide * c;
        s[i][c] = row < d.tq && key < d.tk
                      ? detail::masked_score(d, b, row, key, d.scale * s[i][c])
                      : -INFINITY;
        mx = s[i][c] > mx ? s[i][c] : mx;
      }
      mx = row_max(mx);
      if (mx == -INFINITY) {  // every key so far masked: nothing to add yet
        #pragma unroll
        for (int c = 0; c < kSub; ++c) s[i][c] = 0.0f;
        continue;
      }
      const float alpha = expf(m[i] - mx);  // 0 on the row's first unmasked block
      float part = 0.0f;
      #pragma unroll
      for (int c = 0; c < kSub; ++c) {
        float p = expf(s[i][c] - mx);
        part += p;
        // The normaliser counts every key; only the output sees the dropout mask.
        if (p != 0.0f) p *= detail::dropout_factor(d, b, row, j0 + tx + kSide * c);
        s[i][c] = d.round_probs ? round_to(d.dtype, p) : p;
      }
      l[i] = l[i] * alpha + part;
      #pragma unroll
      for (int t = 0; t < kOutTiles; ++t) {
        #pragma unroll
        for (int c = 0; c < kSub; ++c) acc[t][i][c] *= alpha;
      }
      m[i] = mx;
    }
    accumulate(acc, s, sa, sb, vt, task.out_col0);
  }
  #pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const float total = row_sum(l[i]);
    const std::int64_t row = i0 + ty + kSide * i;
    if (row >= d.tq) continue;
    const bool empty = m[i] == -INFINITY;  // every key masked: output 0, lse +inf
    const float inv = empty ? 0.0f : 1.0f / total;
    #pragma unroll
    for (int t = 0; t < kOutTiles; ++t) {
      #pragma unroll
      for (int c = 0; c < kSub; ++c) {
        const std::int64_t col = task.out_col0 + t * kTile + tx + kSide * c;
        if (col >= d.dv) continue;
        store(out, d.dtype, detail::out_row(d, b, row) + col, empty ? 0.0f : acc[t][i][c] * inv);
      }
    }
    if (task.out_col0 == 0 && tx == 0) lse[b * d.tq + row] = empty ? INFINITY : m[i] + logf(total);
  }
}

/// out[r] = a_r . b_r over width for each of rows rows: one warp per row, lanes striding the
/// columns, then a fixed butterfly.
__global__ void row_dot_kernel(AttentionDesc d, std::int64_t rows, std::int64_t width,
                               const void* a, const void* b, DType t, float* out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps = std::int64_t{gridDim.x} * blockDim.x / 32;
  // The row is warp-uniform, so whole warps enter and leave the loop (the shuffles need that).
  for (std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) / 32; row < rows;
       row += warps) {
    float sum = 0.0f;
    const std::int64_t o = detail::out_row(d, row / d.tq, row % d.tq);  // dout and out share it
    for (std::int64_t c = lane; c < width; c += 32) {
      sum = fmaf(load(a, t, o + c), load(b, t, o + c), sum);
    }
    for (int lanes = 16; lanes > 0; lanes /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, lanes);
    if (lane == 0) out[row] = sum;
  }
}

/// p (as p z) and ds of one probability, as the reference computes them; both 0 where p is.
struct ProbGrad {
  float pz, ds;
};

__device__ __forceinline__ ProbGrad prob_grad(const AttentionDesc& d, std::int64_t b,
                                              std::int64_t row, std::int64_t key, float dot,
                                              float dp, const float* lse, const float* rowdot) {
  if (row >= d.tq || key >= d.tk) return {0.0f, 0.0f};
  // lse is +inf on fully masked rows, so p = 0 there and on every masked key.
  const float p = expf(detail::masked_score(d, b, row, key, d.scale * dot) - lse[b * d.tq + row]);
  if (p == 0.0f) return {0.0f, 0.0f};
  const float z = detail::dropout_factor(d, b, row, key);
  const float pz = p * z, ds = p * (dp * z - rowdot[b * d.tq + row]);
  if (d.round_probs) return {round_to(d.dtype, pz), round_to(d.dtype, ds)};
  return {pz, ds};
}

/// dk and dv of one key block's rows, over output columns [out_col0, out_col0 + 128).
__global__ void __launch_bounds__(kAttnThreads)
    key_grad_kernel(AttentionDesc d, const void* q, const void* k, const void* v,
                    const void* dout, const float* lse, const float* rowdot, void* dk, void* dv,
                    std::int64_t row_blocks, std::int64_t col_groups) {
  __shared__ float sa[kTile][kLd], sb[kTile][kLd];
  const BlockTask task = block_task(row_blocks, col_groups);
  const std::int64_t b = task.b, j0 = task.row0;
  const int ty = tile_y(), tx = tile_x();
  const RowTile kt = tile_of(k, d, d.k_rows, b, j0, d.tk, d.d);
  const RowTile vt = tile_of(v, d, d.v_rows, b, j0, d.tk, d.dv);
  OutRegs dk_acc = {}, dv_acc = {};
  // Under the causal cut no query row before j0 sees these keys.
  for (std::int64_t i0 = d.causal ? j0 : 0; i0 < d.tq; i0 += kTile) {
    const RowTile qt = tile_of(q, d, d.q_rows, b, i0, d.tq, d.d);
    const RowTile gt = tile_of(dout, d, d.out_rows, b, i0, d.tq, d.dv);
    Regs s, dp;  // transposed tiles: keys are the rows, queries the columns
    gram(s, sa, sb, kt, qt);
    gram(dp, sa, sb, vt, gt);
    #pragma unroll
    for (int i = 0; i < kSub; ++i) {
      #pragma unroll
      for (int c = 0; c < kSub; ++c) {
        const ProbGrad g = prob_grad(d, b, i0 + tx + kSide * c, j0 + ty + kSide * i, s[i][c],
                                     dp[i][c], lse, rowdot);
        s[i][c] = g.pz;
        dp[i][c] = g.ds;
      }
    }
    accumulate(dv_acc, s, sa, sb, gt, task.out_col0);
    accumulate(dk_acc, dp, sa, sb, qt, task.out_col0);
  }
  #pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const std::int64_t key = j0 + ty + kSide * i;
    if (key >= d.tk) continue;
    #pragma unroll
    for (int t = 0; t < kOutTiles; ++t) {
      #pragma unroll
      for (int c = 0; c < kSub; ++c) {
        const std::int64_t col = task.out_col0 + t * kTile + tx + kSide * c;
        if (col < d.d) store(dk, d.dtype, detail::k_row(d, b, key) + col, d.scale * dk_acc[t][i][c]);
        if (col < d.dv) store(dv, d.dtype, detail::v_row(d, b, key) + col, dv_acc[t][i][c]);
      }
    }
  }
}

/// dq of one query block's rows, over output columns [out_col0, out_col0 + 128).
__global__ void __launch_bounds__(kAttnThreads)
    query_grad_kernel(AttentionDesc d, const void* q, const void* k, const void* v,
                      const void* dout, const float* lse, const float* rowdot, void* dq,
                      std::int64_t row_blocks, std::int64_t col_groups) {
  __shared__ float sa[kTile][kLd], sb[kTile][kLd];
  const BlockTask task = block_task(row_blocks, col_groups);
  const std::int64_t b = task.b, i0 = task.row0;
  const int ty = tile_y(), tx = tile_x();
  const RowTile qt = tile_of(q, d, d.q_rows, b, i0, d.tq, d.d);
  const RowTile gt = tile_of(dout, d, d.out_rows, b, i0, d.tq, d.dv);
  OutRegs acc = {};
  const std::int64_t keys = visible_keys(d, i0);
  for (std::int64_t j0 = 0; j0 < keys; j0 += kTile) {
    const RowTile kt = tile_of(k, d, d.k_rows, b, j0, d.tk, d.d);
    const RowTile vt = tile_of(v, d, d.v_rows, b, j0, d.tk, d.dv);
    Regs s, dp;
    gram(s, sa, sb, qt, kt);
    gram(dp, sa, sb, gt, vt);
    #pragma unroll
    for (int i = 0; i < kSub; ++i) {
      #pragma unroll
      for (int c = 0; c < kSub; ++c) {
        s[i][c] = prob_grad(d, b, i0 + ty + kSide * i, j0 + tx + kSide * c, s[i][c], dp[i][c],
                            lse, rowdot)
                      .ds;
      }
    }
    accumulate(acc, s, sa, sb, kt, task.out_col0);
  }
  #pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const std::int64_t row = i0 + ty + kSide * i;
    if (row >= d.tq) continue;
    #pragma unroll
    for (int t = 0; t < kOutTiles; ++t) {
      #pragma unroll
      for (int c = 0; c < kSub; ++c) {
        const std::int64_t col = task.out_col0 + t * kTile + tx + kSide * c;
        if (col < d.d) store(dq, d.dtype, detail::q_row(d, b, row) + col, d.scale * acc[t][i][c]);
      }
    }
  }
}

std::int64_t ceil_div(std::int64_t n, std::int64_t m) { return (n + m - 1) / m; }

/// The 1-D grid of bh * row_blocks * col_groups blocks; ShapeError (naming op) past CUDA's
/// 2^31 - 1 blocks.
dim3 task_grid(const char* op, std::int64_t bh, std::int64_t row_blocks, std::int64_t col_groups) {
  const std::int64_t limit = 2147483647;
  MIXPREC_CHECK(bh <= limit / row_blocks / col_groups, ShapeError, op,
                "the cuda attention kernels take up to 2^31 - 1 blocks of 64 rows x 128 head "
                "columns; bh " << bh << " x " << row_blocks << " row blocks x " << col_groups
                               << " column groups is more");
  return dim3(static_cast<unsigned>(bh * row_blocks * col_groups));
}

/// The path a call takes (attention_path.h), logged when verbose: the path and why the faster
/// ones passed the call on.
AttentionChoice choose_and_log(const char* op, const AttentionDesc& d,
                               std::initializer_list<const void*> buffers,
                               AttentionPath from = first_attention_path(),
                               const std::string& earlier = {}) {
  const bool verbose = verbose_enabled();
  AttentionChoice c = choose_attention_path(d, buffers, from, verbose);
  if (verbose) {
    if (!earlier.empty()) c.skipped = earlier + (c.skipped.empty() ? "" : ", ") + c.skipped;
    verbose_log(op, name(d.dtype), attention_path_name(c.path), c.skipped);
  }
  return c;
}

/// What a cuDNN call that returned false leaves for the log of the path that runs instead.
std::string cudnn_failure() {
  return std::string("cudnn (failed: ") + cudnn_attention_last_error() + ")";
}

}  // namespace

void attention_forward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                       void* out, float* lse) {
  detail::check_attention_desc("attention_forward", d);
  if (d.bh == 0 || d.tq == 0) return;
  AttentionPath path = choose_and_log("attention_forward", d, {q, k, v, out}).path;
  if (path == AttentionPath::cudnn) {
    if (cudnn_attention_forward(d, q, k, v, out, lse)) return;
    path = choose_and_log("attention_forward", d, {q, k, v, out}, AttentionPath::flash,
                          cudnn_failure()).path;
  }
  if (path == AttentionPath::flash) return flash_attention_forward(d, q, k, v, out, lse);
  if (path == AttentionPath::gemm) return attention_forward_gemms(d, q, k, v, out, lse);
  // At least one column group even when dv == 0: lse is still an output.
  const std::int64_t row_blocks = ceil_div(d.tq, kTile);
  const std::int64_t col_groups = d.dv > 0 ? ceil_div(d.dv, kOutWidth) : 1;
  forward_kernel<<<task_grid("attention_forward", d.bh, row_blocks, col_groups), kAttnThreads, 0,
                   stream()>>>(d, q, k, v, out, lse, row_blocks, col_groups);
  check_launch("attention_forward");
}

void attention_backward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                        const void* out, const float* lse, const void* dout, void* dq, void* dk,
                        void* dv) {
  detail::check_attention_desc("attention_backward", d);
  if (d.bh == 0) return;
  const std::initializer_list<const void*> buffers = {q, k, v, dout, dq, dk, dv};
  AttentionPath path = choose_and_log("attention_backward", d, buffers).path;
  if (path == AttentionPath::cudnn) {
    if (cudnn_attention_backward(d, q, k, v, out, lse, dout, dq, dk, dv)) return;
    path = choose_and_log("attention_backward", d, buffers, AttentionPath::flash, cudnn_failure())
               .path;
  }
  const std::int64_t rows = d.bh * d.tq;
  Scratch rowdot(static_cast<std::size_t>(rows) * sizeof(float));  // D_i = dout_i . out_i
  if (rows > 0) {
    row_dot_kernel<<<grid(rows * 32), kThreads, 0, stream()>>>(d, rows, d.dv, dout, out, d.dtype,
                                                                rowdot.as<float>());
    check_launch("attention_backward (row dots)");
  }
  if (path == AttentionPath::flash) {
    return flash_attention_backward(d, q, k, v, lse, rowdot.as<float>(), dout, dq, dk, dv);
  }
  if (path == AttentionPath::gemm) {
    return attention_backward_gemms(d, q, k, v, lse, rowdot.as<float>(), dout, dq, dk, dv);
  }
  // dk and dv: every key row is written, zeros where no query sees it (tq == 0 included).
  const std::int64_t widest = d.d > d.dv ? d.d : d.dv;
  if (d.tk > 0 && widest > 0) {
    const std::int64_t row_blocks = ceil_div(d.tk, kTile), col_groups = ceil_div(widest, kOutWidth);
    key_grad_kernel<<<task_grid("attention_backward", d.bh, row_blocks, col_groups), kAttnThreads,
                      0, stream()>>>(d, q, k, v, dout, lse, rowdot.as<float>(), dk, dv,
                                     row_blocks, col_groups);
    check_launch("attention_backward (dk, dv)");
  }
  // dq: zeros where there are no keys (tk == 0 included).
  if (d.tq > 0 && d.d > 0) {
    const std::int64_t row_blocks = ceil_div(d.tq, kTile), col_groups = ceil_div(d.d, kOutWidth);
    query_grad_kernel<<<task_grid("attention_backward", d.bh, row_blocks, col_groups),
                        kAttnThreads, 0, stream()>>>(d, q, k, v, dout, lse, rowdot.as<float>(), dq,
                                                     row_blocks, col_groups);
    check_launch("attention_backward (dq)");
  }
}

}  // namespace mixprec::kernels::cuda
