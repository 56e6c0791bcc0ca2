// Attention through batched GEMMs: the scores of a group of batch-heads are materialised in
// f32, and every product is one strided-batched cuBLASLt call (matmul_cublaslt.h). Why: the
// flash-style kernels of attention.cu run their tile products on CUDA cores at 5-8 TFLOP/s, and
// on the first GPU run (H200, GPT-2-small shape, bf16) attention took 93 ms of a 216 ms step.
//
// Numerics are the reference's up to summation order:
//  - the scores s = scale (q . k) and dp = dout . v: for 16-bit operands on TF32 Tensor Cores,
//    whose inputs hold every bf16 and f16 value exactly (products exact, f32 accumulation); in
//    full f32 for f32 operands;
//  - the probability products (p z) v, (p z)^T dout, ds k and ds^T q: full f32 (no TF32), since
//    p and ds are f32 values a TF32 rounding would change;
//  - the causal cut, the dropout decision and p, ds themselves: the reference's per-element
//    functions (spec/attention_rules.h), the same as attention.cu's; the forward keeps the
//    output unnormalised until the store (acc * (1 / l), as attention.cu), and the backward
//    recomputes p from lse.
// Operands are gathered into contiguous f32 copies per group (their layouts may be the strided
// heads of a projection, which a single batch stride cannot describe), and results scattered
// back with one rounding. A group holds as many batch-heads as keep its score matrix within
// 64 MiB. Deterministic: fixed launches per shape, cuBLASLt's plan cached per problem, and
// fixed-order warp trees in the row kernels.
#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/attention_gemm.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_cublaslt.h"
#include "kernels/spec/attention_rules.h"

namespace mixprec::kernels::cuda {
namespace {

/// The score matrices of one group of batch-heads stay within this.
constexpr std::int64_t kScoreBytes = std::int64_t{64} << 20;

/// One operand of a group: rows [0, rows) of batch-heads [bh0, bh0 + count), `width` elements
/// each, placed by layout l.
struct Operand {
  AttentionLayout l;
  std::int64_t rows, width;
};

/// dst[(i rows + r) width + c] = element c of row r of batch-head bh0 + i, widened to f32.
__global__ void gather_kernel(AttentionDesc d, Operand o, const void* src, std::int64_t bh0,
                              std::int64_t count, float* dst) {
  const std::int64_t total = count * o.rows * o.width;
  MIXPREC_GRID_STRIDE(e, total) {
    const std::int64_t c = e % o.width, r = e / o.width % o.rows, i = e / (o.width * o.rows);
    dst[e] = load(src, d.dtype, detail::row_start(d, o.l, bh0 + i, r, o.rows, o.width) + c);
  }
}

/// The inverse of gather_kernel, each value times row_scale[row] (when given) and rounded once
/// to the desc's dtype.
__global__ void scatter_kernel(AttentionDesc d, Operand o, const float* src,
                               const float* row_scale, std::int64_t bh0, std::int64_t count,
                               void* dst) {
  const std::int64_t total = count * o.rows * o.width;
  MIXPREC_GRID_STRIDE(e, total) {
    const std::int64_t c = e % o.width, r = e / o.width % o.rows, i = e / (o.width * o.rows);
    const float v = row_scale != nullptr ? src[e] * row_scale[e / o.width] : src[e];
    store(dst, d.dtype, detail::row_start(d, o.l, bh0 + i, r, o.rows, o.width) + c, v);
  }
}

/// The larger, NaN never winning (as attention.cu's running max).
struct Max {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

/// One warp per score row (rows of batch-heads bh0..): the row's scores become p z with
/// p = e^(s - max) unnormalised, lse[b, i] = max + log(l) and inv[row] = 1 / l, where l sums
/// every p (the dropout mask reaches only the output, as in the reference). A row with every
/// key masked gets zeros, lse +inf and inv 0, so its output is 0.
__global__ void softmax_rows_kernel(AttentionDesc d, std::int64_t bh0, std::int64_t rows,
                                    float* s, float* lse, float* inv) {
  using W = Group<kWarp>;
  for (std::int64_t r = W::first_item(); r < rows; r += W::item_stride()) {
    const std::int64_t b = bh0 + r / d.tq, i = r % d.tq;
    float* row = s + r * d.tk;
    float mx = -INFINITY;
    for (std::int64_t j = W::lane(); j < d.tk; j += kWarp) {
      const float x = detail::masked_score(d, b, i, j, row[j]);
      mx = x > mx ? x : mx;
    }
    mx = W::all_reduce(mx, Max{});
    float sum = 0.0f;
    for (std::int64_t j = W::lane(); j < d.tk; j += kWarp) {
      float p = mx == -INFINITY ? 0.0f : expf(detail::masked_score(d, b, i, j, row[j]) - mx);
      sum += p;
      if (p != 0.0f) p *= detail::dropout_factor(d, b, i, j);
      row[j] = d.round_probs ? round_to(d.dtype, p) : p;
    }
    const float total = W::all_reduce(sum, Add{});
    if (W::lane() == 0) {
      const bool empty = mx == -INFINITY;
      lse[b * d.tq + i] = empty ? INFINITY : mx + logf(total);
      inv[r] = empty ? 0.0f : 1.0f / total;
    }
  }
}

/// Per score of batch-heads bh0..: s (scaled scores) becomes p z and dp (dout . v) becomes
/// ds = p (dp z - D_i), both 0 where p is (masked keys, and rows whose lse is +inf).
__global__ void prob_grad_kernel(AttentionDesc d, std::int64_t bh0, std::int64_t count,
                                 float* s, float* dp, const float* lse, const float* rowdot) {
  const std::int64_t total = count * d.tq * d.tk;
  MIXPREC_GRID_STRIDE(e, total) {
    const std::int64_t j = e % d.tk, r = e / d.tk;
    const std::int64_t b = bh0 + r / d.tq, i = r % d.tq;
    const float p = expf(detail::masked_score(d, b, i, j, s[e]) - lse[b * d.tq + i]);
    if (p == 0.0f) {
      s[e] = 0.0f;
      dp[e] = 0.0f;
      continue;
    }
    const float z = detail::dropout_factor(d, b, i, j);
    const float pz = p * z, ds = p * (dp[e] * z - rowdot[b * d.tq + i]);
    s[e] = d.round_probs ? round_to(d.dtype, pz) : pz;
    dp[e] = d.round_probs ? round_to(d.dtype, ds) : ds;
  }
}

/// Batch-heads per group.
std::int64_t group_size(const AttentionDesc& d) {
  const std::int64_t per = d.tq * d.tk * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t n = kScoreBytes / per;
  return n < 1 ? 1 : (n < d.bh ? n : d.bh);
}

/// Bytes of n f32 values.
std::size_t floats(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); }

void gather(const AttentionDesc& d, const Operand& o, const void* src, std::int64_t bh0,
            std::int64_t count, float* dst) {
  gather_kernel<<<grid(count * o.rows * o.width), kThreads, 0, stream()>>>(d, o, src, bh0, count,
                                                                            dst);
  check_launch("attention (gather)");
}

void scatter(const AttentionDesc& d, const Operand& o, const float* src, const float* row_scale,
             std::int64_t bh0, std::int64_t count, void* dst) {
  scatter_kernel<<<grid(count * o.rows * o.width), kThreads, 0, stream()>>>(d, o, src, row_scale,
                                                                             bh0, count, dst);
  check_launch("attention (scatter)");
}

}  // namespace

bool attention_takes_gemms(const AttentionDesc& d) {
  return d.mask == nullptr && d.bh > 0 && d.tq > 0 && d.tk > 0 && d.d > 0 && d.dv > 0 &&
         d.tq * d.tk >= 4096;
}

void attention_forward_gemms(const AttentionDesc& d, const void* q, const void* k, const void* v,
                             void* out, float* lse) {
  const char* op = "attention_forward";
  const std::int64_t g = group_size(d);
  const bool tf32 = d.dtype != DType::f32;  // 16-bit operands are exact in TF32
  const Operand oq{d.q_rows, d.tq, d.d}, ok{d.k_rows, d.tk, d.d}, ov{d.v_rows, d.tk, d.dv},
      oo{d.out_rows, d.tq, d.dv};
  const Scratch scores(floats(g * d.tq * d.tk), op), q32(floats(g * d.tq * d.d), op),
      k32(floats(g * d.tk * d.d), op), v32(floats(g * d.tk * d.dv), op),
      out32(floats(g * d.tq * d.dv), op), inv32(floats(g * d.tq), op);
  float *const s = scores.as<float>(), *const qf = q32.as<float>(), *const kf = k32.as<float>(),
               *const vf = v32.as<float>(), *const of = out32.as<float>(),
               *const inv = inv32.as<float>();
  for (std::int64_t bh0 = 0; bh0 < d.bh; bh0 += g) {
    const std::int64_t n = d.bh - bh0 < g ? d.bh - bh0 : g;
    gather(d, oq, q, bh0, n, qf);
    gather(d, ok, k, bh0, n, kf);
    gather(d, ov, v, bh0, n, vf);
    batched_gemm_f32(n, d.tq, d.tk, d.d, false, true, d.scale, qf, kf, s, tf32);
    const std::int64_t rows = n * d.tq;
    softmax_rows_kernel<<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(d, bh0, rows, s, lse,
                                                                           inv);
    check_launch("attention_forward (softmax rows)");
    batched_gemm_f32(n, d.tq, d.dv, d.tk, false, false, 1.0f, s, vf, of, false);
    scatter(d, oo, of, inv, bh0, n, out);
  }
}

void attention_backward_gemms(const AttentionDesc& d, const void* q, const void* k,
                              const void* v, const float* lse, const float* rowdot,
                              const void* dout, void* dq, void* dk, void* dv) {
  const char* op = "attention_backward";
  const std::int64_t g = group_size(d);
  const bool tf32 = d.dtype != DType::f32;
  const Operand oq{d.q_rows, d.tq, d.d}, ok{d.k_rows, d.tk, d.d}, ov{d.v_rows, d.tk, d.dv},
      oo{d.out_rows, d.tq, d.dv};
  const Scratch scores(floats(g * d.tq * d.tk), op), grads(floats(g * d.tq * d.tk), op),
      q32(floats(g * d.tq * d.d), op), k32(floats(g * d.tk * d.d), op),
      v32(floats(g * d.tk * d.dv), op), dout32(floats(g * d.tq * d.dv), op),
      dq32(floats(g * d.tq * d.d), op), dk32(floats(g * d.tk * d.d), op),
      dv32(floats(g * d.tk * d.dv), op);
  float *const s = scores.as<float>(), *const dp = grads.as<float>(), *const qf = q32.as<float>(),
               *const kf = k32.as<float>(), *const vf = v32.as<float>(),
               *const gf = dout32.as<float>(), *const dqf = dq32.as<float>(),
               *const dkf = dk32.as<float>(), *const dvf = dv32.as<float>();
  for (std::int64_t bh0 = 0; bh0 < d.bh; bh0 += g) {
    const std::int64_t n = d.bh - bh0 < g ? d.bh - bh0 : g;
    gather(d, oq, q, bh0, n, qf);
    gather(d, ok, k, bh0, n, kf);
    gather(d, ov, v, bh0, n, vf);
    gather(d, oo, dout, bh0, n, gf);
    batched_gemm_f32(n, d.tq, d.tk, d.d, false, true, d.scale, qf, kf, s, tf32);
    batched_gemm_f32(n, d.tq, d.tk, d.dv, false, true, 1.0f, gf, vf, dp, tf32);
    prob_grad_kernel<<<grid(n * d.tq * d.tk), kThreads, 0, stream()>>>(d, bh0, n, s, dp, lse,
                                                                       rowdot);
    check_launch("attention_backward (probabilities)");
    // dv = (p z)^T dout; dq = scale ds k; dk = scale ds^T q.
    batched_gemm_f32(n, d.tk, d.dv, d.tq, true, false, 1.0f, s, gf, dvf, false);
    batched_gemm_f32(n, d.tq, d.d, d.tk, false, false, d.scale, dp, kf, dqf, false);
    batched_gemm_f32(n, d.tk, d.d, d.tq, true, false, d.scale, dp, qf, dkf, false);
    scatter(d, oq, dqf, nullptr, bh0, n, dq);
    scatter(d, ok, dkf, nullptr, bh0, n, dk);
    scatter(d, ov, dvf, nullptr, bh0, n, dv);
  }
}

}  // namespace mixprec::kernels::cuda
