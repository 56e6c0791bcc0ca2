// Flash attention on Tensor Cores (attention_flash.h): mma.sync m16n8k16 with bf16 or f16
// operands and f32 accumulators, ldmatrix from padded shared tiles, cp.async double buffering.
//
// Why not attention_gemm.cu's batched GEMMs for 16-bit inputs: they materialise f32 score
// matrices and gather operands into f32 copies, so attention was bound by memory passes (on an
// H200, GPT-2-small's attention took 47 of a 78 ms step). Here no score matrix exists: each
// block of 64 query (or key) rows streams the other operand through shared memory once.
//
// One block = 4 warps; warp w owns 16 rows of the block's 64. The m16n8k16 fragments (PTX ISA,
// "Matrix Fragments for mma.m16n8k16"): with g = lane / 4 and c = lane % 4,
//   A (16 x 16): a0 (g, 2c..2c+1), a1 (g + 8, 2c..), a2 (g, 8 + 2c..), a3 (g + 8, 8 + 2c..);
//   B (16 x 8):  b0 (k = 2c..2c+1, n = g), b1 (k = 8 + 2c.., n = g);
//   C (16 x 8):  c0, c1 (g, 2c..2c+1), c2, c3 (g + 8, 2c..).
// So the C fragments of two neighbouring n-tiles are, rounded and packed in pairs, the A
// fragment of a 16-wide k slice: probabilities and score gradients go from one product into
// the next without touching shared memory (and that packing is the spec's rounding).
// ldmatrix .x4 loads four 8 x 8 matrices; lane l gives the row address of matrix l / 8:
//   A from a [rows][k] tile:           row (l & 7) + 8 ((l >> 3) & 1), column 8 (l >> 4);
//   B from a [n][k] tile (K for q k^T): row (l & 7) + 8 (l >> 4), column 8 ((l >> 3) & 1);
//   B from a [k][n] tile (V for p v), .trans: row (l & 7) + 8 ((l >> 3) & 1), column 8 (l >> 4);
// both B forms give b0, b1 of n-tile n0 and b0, b1 of n-tile n0 + 8.
//
// Passes:
//  - forward: a block per (batch-head, 64 query rows) walks the visible key blocks, online
//    softmax in f32 (running max m, per-lane partial sums l rescaled by e^(m_old - m_new));
//    P = r(e^(s - m) z) feeds P V; out = acc / l and lse = m + log l.
//  - backward, without atomics: a block per (batch-head, 64 keys) walks the query blocks that
//    see them: S^T = K Q^T and dP^T = V dO^T, then dV += r(P z)^T dO and dK += r(dS)^T Q; a
//    block per (batch-head, 64 queries) walks the key blocks for dQ += r(dS) K (recomputing S
//    and dP: two more products than an atomic dQ, in exchange for fixed bits).
// Rows past the end read as zeros (cp.async's zero fill) and their scores as -inf: they add
// nothing, and nothing is stored for them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_flash.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector_path.h"
#include "kernels/spec/attention_rules.h"

namespace mixprec::kernels::cuda {
namespace {

constexpr int kRows = 64;     ///< query (or key) rows per block, 16 per warp
constexpr int kCols = 64;     ///< keys (or queries) per streamed tile
constexpr int kWarps = 4;
constexpr int kFlashThreads = kWarps * 32;

/// Shared row pitch in elements: 8 more than the head size, so the 8 rows an ldmatrix reads
/// start 16 bytes apart modulo 128 (no bank conflicts) and every row stays 16-byte aligned.
template <int D>
constexpr int pitch() { return D + 8; }

template <int D>
constexpr int tile_elems() { return kRows * pitch<D>(); }

// ---- PTX wrappers ----

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, asynchronously; bytes == 0 fills the 16 bytes with zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

using Frag = std::uint32_t[4];

__device__ __forceinline__ void ldmatrix_x4(Frag& r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(Frag& r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

/// c += a b for one m16n8k16 tile (b0, b1: the B fragment of one n-tile).
template <bool kBf16>
__device__ __forceinline__ void mma(float (&c)[4], const Frag& a, std::uint32_t b0,
                                    std::uint32_t b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// Two floats rounded once (RNE) to the 16-bit type, lo in the low half: the spec's r().
template <bool kBf16>
__device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
  std::uint32_t r;
  if constexpr (kBf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    r = *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    r = *reinterpret_cast<const std::uint32_t*>(&h);
  }
  return r;
}

/// The A fragment of k slice kk (16 columns) from the C fragments of n-tiles 2kk and 2kk + 1.
template <bool kBf16>
__device__ __forceinline__ void c_to_a(Frag& a, const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack<kBf16>(lo[0], lo[1]);
  a[1] = pack<kBf16>(lo[2], lo[3]);
  a[2] = pack<kBf16>(hi[0], hi[1]);
  a[3] = pack<kBf16>(hi[2], hi[3]);
}

// ---- operands ----

/// Rows of one batch-head of an operand: row r starts at element first + r * stride.
struct Rows {
  const std::uint16_t* data;
  std::int64_t first, stride, count;
};

__device__ __forceinline__ Rows rows_of(const void* data, const AttentionDesc& d,
                                        const AttentionLayout& l, std::int64_t b,
                                        std::int64_t count, std::int64_t width) {
  const std::int64_t first = detail::row_start(d, l, b, 0, count, width);
  return {static_cast<const std::uint16_t*>(data), first,
          detail::row_start(d, l, b, 1, count, width) - first, count};
}

/// Starts copying rows [row0, row0 + 64) of m into a [64][pitch] shared tile; rows past the end
/// become zeros.
template <int D>
__device__ __forceinline__ void load_tile(std::uint16_t* tile, const Rows& m, std::int64_t row0) {
  constexpr int kChunks = D / 8;  // 16-byte pieces per row
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kChunks; e += kFlashThreads) {
    const int r = e / kChunks, c = e % kChunks * 8;
    const std::int64_t row = row0 + r;
    const bool in = row < m.count;
    cp_async16(tile + r * pitch<D>() + c, in ? m.data + m.first + row * m.stride + c : m.data,
               in ? 16 : 0);
  }
}

/// Stores the two values of a C fragment row pair (columns col, col + 1), rounded once.
template <bool kBf16>
__device__ __forceinline__ void store_pair(void* base, std::int64_t at, float x, float y) {
  *reinterpret_cast<std::uint32_t*>(static_cast<std::uint16_t*>(base) + at) = pack<kBf16>(x, y);
}

// ---- shared pieces of the three kernels ----

/// acc[n] = A (16 rows of a, from its row a_row0) times the 64 rows of b as B^T, over D columns:
/// the 16 x 64 scores of a warp's rows against a streamed tile.
template <int D, bool kBf16>
__device__ __forceinline__ void scores(float (&acc)[8][4], const std::uint16_t* a, int a_row0,
                                       const std::uint16_t* b) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  #pragma unroll
  for (int n = 0; n < 8; ++n) {
    #pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  }
  #pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    Frag af;
    ldmatrix_x4(af, a + (a_row0 + (lane & 7) + ((lane >> 3) & 1) * 8) * pitch<D>() + kk * 16 +
                        (lane >> 4) * 8);
    #pragma unroll
    for (int np = 0; np < 4; ++np) {
      Frag bf;
      ldmatrix_x4(bf, b + (np * 16 + (lane & 7) + (lane >> 4) * 8) * pitch<D>() + kk * 16 +
                          ((lane >> 3) & 1) * 8);
      mma<kBf16>(acc[2 * np], af, bf[0], bf[1]);
      mma<kBf16>(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

/// out (16 x D) += P (16 x 64, C fragments, packed here) times the [64][D] tile m.
template <int D, bool kBf16>
__device__ __forceinline__ void product(float (&out)[D / 8][4], const float (&p)[8][4],
                                        const std::uint16_t* m) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  #pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    Frag af;
    c_to_a<kBf16>(af, p[2 * kk], p[2 * kk + 1]);
    #pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      Frag bf;
      ldmatrix_x4_trans(bf, m + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * pitch<D>() +
                                np * 16 + (lane >> 4) * 8);
      mma<kBf16>(out[2 * np], af, bf[0], bf[1]);
      mma<kBf16>(out[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

/// The double buffering of the key-block loops: starts copying key block jb + 1 of k and v into
/// the other stage (when there is one), waits for block jb's copies, and returns block jb's k
/// stage (its v stage is at the same offset of sv). The barrier that ends each iteration keeps
/// the next call from overwriting a stage still being read.
template <int D>
__device__ __forceinline__ const std::uint16_t* next_key_stage(std::uint16_t* sk, const Rows& kr,
                                                              std::uint16_t* sv, const Rows& vr,
                                                              int jb, int blocks) {
  if (jb + 1 < blocks) {
    const int stage = (jb + 1) & 1;
    load_tile<D>(sk + stage * tile_elems<D>(), kr, (jb + 1) * std::int64_t{kCols});
    load_tile<D>(sv + stage * tile_elems<D>(), vr, (jb + 1) * std::int64_t{kCols});
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
  return sk + (jb & 1) * tile_elems<D>();
}

/// Keys that query rows [i0, i0 + 64) can see: all, or up to the last of those rows (causal).
__device__ __forceinline__ std::int64_t visible_keys(const AttentionDesc& d, std::int64_t i0) {
  if (!d.causal) return d.tk;
  const std::int64_t last = i0 + kRows < d.tq ? i0 + kRows : d.tq;
  return last < d.tk ? last : d.tk;
}

/// Whether every score of the tile (query rows i0.., keys j0..) is plain scale * dot: inside
/// both extents, under no mask, and wholly below the causal diagonal.
__device__ __forceinline__ bool plain_tile(const AttentionDesc& d, std::int64_t i0,
                                           std::int64_t j0) {
  return d.mask == nullptr && i0 + kRows <= d.tq && j0 + kCols <= d.tk &&
         !(d.causal && j0 + kCols - 1 > i0);
}

/// s = scale * dot masked by the reference's rule; -inf outside the extents.
__device__ __forceinline__ float score(const AttentionDesc& d, bool plain, std::int64_t b,
                                       std::int64_t row, std::int64_t key, float dot) {
  const float s = d.scale * dot;
  if (plain) return s;
  return row < d.tq && key < d.tk ? detail::masked_score(d, b, row, key, s) : -INFINITY;
}

/// The max over the 4 lanes that share a fragment row.
__device__ __forceinline__ float quad_max(float x) {
  float o = __shfl_xor_sync(0xffffffffu, x, 1);
  x = o > x ? o : x;
  o = __shfl_xor_sync(0xffffffffu, x, 2);
  return o > x ? o : x;
}

/// The sum over those 4 lanes, the same bits on each (a + b == b + a).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

constexpr float kLog2e = 1.4426950408889634f;

/// e^x through exp2 (one MUFU.EX2 and a multiply; within a few f32 ulp of expf, far below the
/// spec's 16-bit rounding of what it feeds).
__device__ __forceinline__ float fast_exp(float x) { return exp2f(x * kLog2e); }

// ---- forward ----

template <int D, bool kBf16>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(AttentionDesc d, const void* q, const void* k, const void* v, void* out,
                         float* lse, std::int64_t row_blocks) {
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* const sq = smem;
  std::uint16_t* const sk = sq + tile_elems<D>();      // two stages
  std::uint16_t* const sv = sk + 2 * tile_elems<D>();  // two stages
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  // Under the causal cut the last query blocks do the most work: they start first.
  const std::int64_t b = blockIdx.x / row_blocks;
  const std::int64_t i0 = (row_blocks - 1 - blockIdx.x % row_blocks) * kRows;
  const Rows qr = rows_of(q, d, d.q_rows, b, d.tq, D), kr = rows_of(k, d, d.k_rows, b, d.tk, D),
             vr = rows_of(v, d, d.v_rows, b, d.tk, D);
  const std::int64_t keys = visible_keys(d, i0);
  const int blocks = static_cast<int>((keys + kCols - 1) / kCols);
  load_tile<D>(sq, qr, i0);
  if (blocks > 0) {
    load_tile<D>(sk, kr, 0);
    load_tile<D>(sv, vr, 0);
  }
  cp_async_commit();

  float acc[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const std::int64_t row_base = i0 + warp * 16 + lane / 4;  // rows row_base and row_base + 8
  for (int jb = 0; jb < blocks; ++jb) {
    const std::uint16_t* const kt = next_key_stage<D>(sk, kr, sv, vr, jb, blocks);
    const std::uint16_t* const vt = sv + (jb & 1) * tile_elems<D>();
    const std::int64_t j0 = jb * std::int64_t{kCols};
    float s[8][4];
    scores<D, kBf16>(s, sq, warp * 16, kt);
    const bool plain = plain_tile(d, i0, j0);
    float mx[2] = {m[0], m[1]};
    #pragma unroll
    for (int n = 0; n < 8; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t row = row_base + (e >> 1) * 8, key = j0 + n * 8 + (lane % 4) * 2 + (e & 1);
        s[n][e] = score(d, plain, b, row, key, s[n][e]);
        mx[e >> 1] = s[n][e] > mx[e >> 1] ? s[n][e] : mx[e >> 1];
      }
    }
    float base[2], alpha[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = quad_max(mx[h]);
      // Every key so far masked: exponents against 0 give zeros, and acc and l are still 0.
      base[h] = mx[h] == -INFINITY ? 0.0f : mx[h];
      alpha[h] = fast_exp(m[h] - base[h]);  // 0 while m is -inf
      m[h] = mx[h];
      l[h] *= alpha[h];
    }
    #pragma unroll
    for (int n = 0; n < 8; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = fast_exp(s[n][e] - base[e >> 1]);
        l[e >> 1] += p;  // the normaliser counts every key; only the output sees dropout
        if (d.dropout_p != 0.0f && p != 0.0f) {
          p *= detail::dropout_factor(d, b, row_base + (e >> 1) * 8, j0 + n * 8 + (lane % 4) * 2 + (e & 1));
        }
        s[n][e] = p;
      }
    }
    #pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] *= alpha[e >> 1];
    }
    product<D, kBf16>(acc, s, vt);
    __syncthreads();  // the stage just read is the next prefetch's target
  }
  if (blocks == 0) {
    cp_async_wait<0>();  // the q tile's copy must land before the block exits
  }
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = quad_sum(l[h]);
    const std::int64_t row = row_base + h * 8;
    if (row >= d.tq) continue;
    const bool empty = m[h] == -INFINITY;  // every key masked: output 0, lse +inf
    const float inv = empty ? 0.0f : 1.0f / total;
    const std::int64_t o = detail::out_row(d, b, row) + (lane % 4) * 2;
    #pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      store_pair<kBf16>(out, o + n * 8, acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
    }
    if (lane % 4 == 0) lse[b * d.tq + row] = empty ? INFINITY : m[h] + logf(total);
  }
}

// ---- backward ----

/// The spec's backward values of one score: r(p z) for dv and r(ds) for dq, dk are packed by
/// the caller; here p z and ds in f32 (0 where p is: masked keys, rows with lse +inf).
struct ProbGrad {
  float pz, ds;
};

__device__ __forceinline__ ProbGrad prob_grad(const AttentionDesc& d, bool plain, std::int64_t b,
                                              std::int64_t row, std::int64_t key, float dot,
                                              float dp, float row_lse, float row_dot) {
  const float s = score(d, plain, b, row, key, dot);
  const float p = fast_exp(s - row_lse);
  if (p == 0.0f) return {0.0f, 0.0f};
  const float z = d.dropout_p != 0.0f ? detail::dropout_factor(d, b, row, key) : 1.0f;
  return {p * z, p * (dp * z - row_dot)};
}

/// dk and dv of 64 keys: warp w owns keys j0 + 16w .. + 16 as the rows of S^T = K Q^T.
template <int D, bool kBf16>
__global__ void __launch_bounds__(kFlashThreads)
    flash_key_grad_kernel(AttentionDesc d, const void* q, const void* k, const void* v,
                          const void* dout, const float* lse, const float* rowdot, void* dk,
                          void* dv, std::int64_t key_blocks) {
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* const sk = smem;
  std::uint16_t* const sv = sk + tile_elems<D>();
  std::uint16_t* const sq = sv + tile_elems<D>();       // two stages
  std::uint16_t* const sg = sq + 2 * tile_elems<D>();   // dout, two stages
  float* const slse = reinterpret_cast<float*>(sg + 2 * tile_elems<D>());  // two stages of 64
  float* const sdot = slse + 2 * kCols;                                    // two stages of 64
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t b = blockIdx.x / key_blocks, j0 = blockIdx.x % key_blocks * kRows;
  const Rows qr = rows_of(q, d, d.q_rows, b, d.tq, D), kr = rows_of(k, d, d.k_rows, b, d.tk, D),
             vr = rows_of(v, d, d.v_rows, b, d.tk, D), gr = rows_of(dout, d, d.out_rows, b, d.tq, D);
  // Queries that see these keys: all, or under the causal cut those from j0 on.
  const std::int64_t first = d.causal ? j0 : 0;
  const int blocks = first < d.tq ? static_cast<int>((d.tq - first + kCols - 1) / kCols) : 0;
  const auto stage_rows = [&](int ib) {
    const int stage = ib & 1;
    const std::int64_t i0 = first + ib * std::int64_t{kCols};
    load_tile<D>(sq + stage * tile_elems<D>(), qr, i0);
    load_tile<D>(sg + stage * tile_elems<D>(), gr, i0);
    for (int r = static_cast<int>(threadIdx.x); r < kCols; r += kFlashThreads) {
      const std::int64_t row = i0 + r;
      slse[stage * kCols + r] = row < d.tq ? lse[b * d.tq + row] : INFINITY;  // p = 0 past tq
      sdot[stage * kCols + r] = row < d.tq ? rowdot[b * d.tq + row] : 0.0f;
    }
  };
  load_tile<D>(sk, kr, j0);
  load_tile<D>(sv, vr, j0);
  if (blocks > 0) stage_rows(0);
  cp_async_commit();

  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};
  const std::int64_t key_base = j0 + warp * 16 + lane / 4;  // keys key_base and key_base + 8
  for (int ib = 0; ib < blocks; ++ib) {
    if (ib + 1 < blocks) {
      stage_rows(ib + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int stage = ib & 1;
    const std::uint16_t* const qt = sq + stage * tile_elems<D>();
    const std::uint16_t* const gt = sg + stage * tile_elems<D>();
    const std::int64_t i0 = first + ib * std::int64_t{kCols};
    float st[8][4], dpt[8][4];
    scores<D, kBf16>(st, sk, warp * 16, qt);   // S^T: keys x queries
    scores<D, kBf16>(dpt, sv, warp * 16, gt);  // dP^T = V dout^T
    const bool plain = plain_tile(d, i0, j0);
    #pragma unroll
    for (int n = 0; n < 8; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n * 8 + (lane % 4) * 2 + (e & 1);
        const ProbGrad g = prob_grad(d, plain, b, i0 + col, key_base + (e >> 1) * 8, st[n][e],
                                     dpt[n][e], slse[stage * kCols + col],
                                     sdot[stage * kCols + col]);
        st[n][e] = g.pz;
        dpt[n][e] = g.ds;
      }
    }
    product<D, kBf16>(dv_acc, st, gt);   // dV += r(P z)^T dout
    product<D, kBf16>(dk_acc, dpt, qt);  // dK += r(dS)^T q (scaled at the store)
    __syncthreads();
  }
  cp_async_wait<0>();
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t key = key_base + h * 8;
    if (key >= d.tk) continue;
    const std::int64_t ko = detail::k_row(d, b, key) + (lane % 4) * 2;
    const std::int64_t vo = detail::v_row(d, b, key) + (lane % 4) * 2;
    #pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      store_pair<kBf16>(dk, ko + n * 8, d.scale * dk_acc[n][2 * h], d.scale * dk_acc[n][2 * h + 1]);
      store_pair<kBf16>(dv, vo + n * 8, dv_acc[n][2 * h], dv_acc[n][2 * h + 1]);
    }
  }
}

/// dq of 64 queries: warp w owns queries i0 + 16w .. + 16 and walks the key blocks they see.
template <int D, bool kBf16>
__global__ void __launch_bounds__(kFlashThreads)
    flash_query_grad_kernel(AttentionDesc d, const void* q, const void* k, const void* v,
                            const void* dout, const float* lse, const float* rowdot, void* dq,
                            std::int64_t row_blocks) {
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* const sq = smem;
  std::uint16_t* const sg = sq + tile_elems<D>();
  std::uint16_t* const sk = sg + tile_elems<D>();      // two stages
  std::uint16_t* const sv = sk + 2 * tile_elems<D>();  // two stages
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t b = blockIdx.x / row_blocks;
  const std::int64_t i0 = (row_blocks - 1 - blockIdx.x % row_blocks) * kRows;
  const Rows qr = rows_of(q, d, d.q_rows, b, d.tq, D), kr = rows_of(k, d, d.k_rows, b, d.tk, D),
             vr = rows_of(v, d, d.v_rows, b, d.tk, D), gr = rows_of(dout, d, d.out_rows, b, d.tq, D);
  const std::int64_t keys = visible_keys(d, i0);
  const int blocks = static_cast<int>((keys + kCols - 1) / kCols);
  load_tile<D>(sq, qr, i0);
  load_tile<D>(sg, gr, i0);
  if (blocks > 0) {
    load_tile<D>(sk, kr, 0);
    load_tile<D>(sv, vr, 0);
  }
  cp_async_commit();

  const std::int64_t row_base = i0 + warp * 16 + lane / 4;
  float row_lse[2], row_dot[2];
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t row = row_base + h * 8;
    row_lse[h] = row < d.tq ? lse[b * d.tq + row] : INFINITY;
    row_dot[h] = row < d.tq ? rowdot[b * d.tq + row] : 0.0f;
  }
  float acc[D / 8][4] = {};
  for (int jb = 0; jb < blocks; ++jb) {
    const std::uint16_t* const kt = next_key_stage<D>(sk, kr, sv, vr, jb, blocks);
    const std::uint16_t* const vt = sv + (jb & 1) * tile_elems<D>();
    const std::int64_t j0 = jb * std::int64_t{kCols};
    float s[8][4], dp[8][4];
    scores<D, kBf16>(s, sq, warp * 16, kt);
    scores<D, kBf16>(dp, sg, warp * 16, vt);
    const bool plain = plain_tile(d, i0, j0);
    #pragma unroll
    for (int n = 0; n < 8; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        s[n][e] = prob_grad(d, plain, b, row_base + h * 8, j0 + n * 8 + (lane % 4) * 2 + (e & 1),
                            s[n][e], dp[n][e], row_lse[h], row_dot[h])
                      .ds;
      }
    }
    product<D, kBf16>(acc, s, kt);  // dQ += r(dS) K (scaled at the store)
    __syncthreads();
  }
  cp_async_wait<0>();
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t row = row_base + h * 8;
    if (row >= d.tq) continue;
    const std::int64_t o = detail::q_row(d, b, row) + (lane % 4) * 2;
    #pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      store_pair<kBf16>(dq, o + n * 8, d.scale * acc[n][2 * h], d.scale * acc[n][2 * h + 1]);
    }
  }
}

// ---- launches ----

std::int64_t ceil_div(std::int64_t n, std::int64_t m) { return (n + m - 1) / m; }

template <int D>
constexpr std::size_t forward_smem() { return 5 * tile_elems<D>() * sizeof(std::uint16_t); }
template <int D>
constexpr std::size_t key_grad_smem() {
  return 6 * tile_elems<D>() * sizeof(std::uint16_t) + 4 * kCols * sizeof(float);
}
template <int D>
constexpr std::size_t query_grad_smem() { return 6 * tile_elems<D>() * sizeof(std::uint16_t); }

/// Raises a kernel's dynamic shared-memory limit once (above 48 KiB it must be asked for).
template <class Kernel>
void allow_smem(Kernel kernel, std::size_t bytes, const char* op) {
  if (bytes > 48 * 1024) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)),
               op, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  }
}

dim3 blocks_grid(const char* op, std::int64_t bh, std::int64_t per) {
  MIXPREC_CHECK(bh <= 2147483647 / per, ShapeError, op,
                "the cuda flash attention kernels take up to 2^31 - 1 blocks; bh " << bh << " x "
                    << per << " row blocks is more");
  return dim3(static_cast<unsigned>(bh * per));
}

template <int D, bool kBf16>
void forward(const AttentionDesc& d, const void* q, const void* k, const void* v, void* out,
             float* lse) {
  const char* op = "attention_forward (flash)";
  const std::int64_t row_blocks = ceil_div(d.tq, kRows);
  auto kernel = flash_forward_kernel<D, kBf16>;
  allow_smem(kernel, forward_smem<D>(), op);
  kernel<<<blocks_grid(op, d.bh, row_blocks), kFlashThreads, forward_smem<D>(), stream()>>>(
      d, q, k, v, out, lse, row_blocks);
  check_launch(op);
}

template <int D, bool kBf16>
void backward(const AttentionDesc& d, const void* q, const void* k, const void* v,
              const float* lse, const float* rowdot, const void* dout, void* dq, void* dk,
              void* dv) {
  const char* op = "attention_backward (flash)";
  if (d.tk > 0) {
    const std::int64_t key_blocks = ceil_div(d.tk, kRows);
    auto kernel = flash_key_grad_kernel<D, kBf16>;
    allow_smem(kernel, key_grad_smem<D>(), op);
    kernel<<<blocks_grid(op, d.bh, key_blocks), kFlashThreads, key_grad_smem<D>(), stream()>>>(
        d, q, k, v, dout, lse, rowdot, dk, dv, key_blocks);
    check_launch(op);
  }
  if (d.tq > 0) {
    const std::int64_t row_blocks = ceil_div(d.tq, kRows);
    auto kernel = flash_query_grad_kernel<D, kBf16>;
    allow_smem(kernel, query_grad_smem<D>(), op);
    kernel<<<blocks_grid(op, d.bh, row_blocks), kFlashThreads, query_grad_smem<D>(), stream()>>>(
        d, q, k, v, dout, lse, rowdot, dq, row_blocks);
    check_launch(op);
  }
}

/// Calls f.template operator()<D, kBf16>() for the desc's head size and dtype.
template <class F>
void dispatch(const AttentionDesc& d, F&& f) {
  const bool bf = d.dtype == DType::bf16;
  switch (d.d) {
    case 32: bf ? f.template operator()<32, true>() : f.template operator()<32, false>(); break;
    case 64: bf ? f.template operator()<64, true>() : f.template operator()<64, false>(); break;
    default: bf ? f.template operator()<128, true>() : f.template operator()<128, false>(); break;
  }
}

bool layout_aligned(const AttentionLayout& l) {
  return l.batch % 8 == 0 && l.head % 8 == 0 && l.row % 8 == 0;
}

}  // namespace

const char* flash_attention_refusal(const AttentionDesc& d,
                                    std::initializer_list<const void*> buffers) {
  if (d.dtype != DType::bf16 && d.dtype != DType::f16) return "f32 operands (Tensor Cores take bf16/f16)";
  if (!d.round_probs) return "attention precision highest (P and dS kept in f32)";
  if (d.d != d.dv) return "head sizes of q and v differ";
  if (d.d != 32 && d.d != 64 && d.d != 128) return "head size not 32, 64 or 128";
  if (d.bh == 0 || d.tq == 0) return "empty";
  for (const void* p : buffers) {
    if (!aligned16(p)) return "a buffer not 16-byte aligned";
  }
  if (!layout_aligned(d.q_rows) || !layout_aligned(d.k_rows) || !layout_aligned(d.v_rows) ||
      !layout_aligned(d.out_rows)) {
    return "operand rows not 16-byte aligned (a stride not a multiple of 8)";
  }
  return nullptr;
}

void flash_attention_forward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                             void* out, float* lse) {
  dispatch(d, [&]<int D, bool kBf16>() { forward<D, kBf16>(d, q, k, v, out, lse); });
}

void flash_attention_backward(const AttentionDesc& d, const void* q, const void* k,
                              const void* v, const float* lse, const float* rowdot,
                              const void* dout, void* dq, void* dk, void* dv) {
  dispatch(d, [&]<int D, bool kBf16>() {
    backward<D, kBf16>(d, q, k, v, lse, rowdot, dout, dq, dk, dv);
  });
}

}  // namespace mixprec::kernels::cuda
