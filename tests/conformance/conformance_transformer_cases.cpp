// The conformance cases of the transformer kernels: embedding lookup and its backward, token
// ids from values, masked fill, attention and the residual add fused into layer norm
// (conformance_cases.h says how cases run).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance_cases.h"
#include "conformance/conformance_util.h"
#include "kernels/attention.h"
#include "kernels/backend.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::conformance {
namespace {

using ktest::Buffer;
using ktest::HostArray;
using ktest::random_buffer;

// ---- transformer ops: embedding lookup ----

Outs run_embedding(const Backend& b, DType t, bool backward) {
  // Many indices into a small table: every row gets hundreds of contributions (threads split
  // the destination rows); row 3 is the padding row.
  const std::int64_t rows = 41, cols = 257, n = 4099;
  HostArray<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = (i * 7919) % rows;
  if (!backward) {
    const Buffer w = random_buffer(t, rows * cols, -3.0f, 3.0f, 61);
    Buffer y(t, n * cols);
    b.embedding(w.data(), t, rows, cols, idx.data(), n, y.data());
    return {exact("y", std::move(y))};
  }
  const Buffer dy = random_buffer(t, n * cols, -1.0f, 1.0f, 62);
  Buffer dw(t, rows * cols), dw32(DType::f32, rows * cols);
  b.embedding_backward(dy.data(), t, idx.data(), n, rows, cols, 3, dw.data(), t);
  b.embedding_backward(dy.data(), t, idx.data(), n, rows, cols, -1, dw32.data(), DType::f32);
  return {exact("dweight", std::move(dw)), exact("dweight_f32", std::move(dw32))};
}

// Token ids in a float buffer of dtype t (whole numbers up to the largest t holds exactly below
// 2^24) become int64 indices; compared as f32 (exact below 2^24).
Outs run_indices_from_values(const Backend& b, DType t) {
  const std::int64_t n = 5003;
  const float top = t == DType::f32 ? 16777215.0f : 2048.0f;  // bf16/f16: exact integers
  Buffer v(t, n);
  for (std::int64_t i = 0; i < n; ++i) v.set(i, std::fmod(static_cast<float>(i) * 7919.0f, top));
  v.set(n - 1, top);
  HostArray<std::int64_t> idx(static_cast<std::size_t>(n), -1);
  b.indices_from_values(v.data(), t, n, idx.data());
  Buffer as_f32(DType::f32, n);
  for (std::int64_t i = 0; i < n; ++i) as_f32.set(i, static_cast<float>(idx[static_cast<std::size_t>(i)]));
  return {exact("indices", std::move(as_f32))};
}

// ---- transformer ops: attention masks ----

Outs run_masked_fill(const Backend& b, DType t) {
  // Scores [B, H, T, T] with a causal [T, T] mask (bf16) broadcast over B and H, and a flat
  // contiguous f32 mask above the parallel threshold.
  const std::int64_t B = 3, H = 4, T = 67;
  const Buffer x = random_buffer(t, B * H * T * T, -4.0f, 4.0f, 63);
  Buffer causal(DType::bf16, T * T);
  for (std::int64_t i = 0; i < T; ++i) {
    for (std::int64_t j = 0; j < T; ++j) causal.set(i * T + j, j > i ? 1.0f : 0.0f);
  }
  const std::vector<std::int64_t> shape{B, H, T, T}, strides{0, 0, T, 1};
  Buffer y(t, B * H * T * T);
  b.masked_fill(shape, x.data(), t, {causal.data(), DType::bf16, strides}, -1e4f, y.data());
  const std::int64_t n = 70001;
  const Buffer x2 = random_buffer(t, n, -4.0f, 4.0f, 64);
  const Buffer m2 = random_buffer(DType::f32, n, -1.0f, 1.0f, 65);  // ~all nonzero but a few
  const std::vector<std::int64_t> flat{n}, one{1};
  Buffer y2(t, n);
  b.masked_fill(flat, x2.data(), t, {m2.data(), DType::f32, one}, 0.5f, y2.data());
  return {exact("y_causal", std::move(y)), exact("y_flat", std::move(y2))};
}

// ---- the table ----

// ---- attention ----

/// Places q, k, v and out as a projection's [B, T, H, d] output leaves them (d.heads heads).
void read_heads_inner(AttentionDesc& d) {
  d.q_rows = {d.tq * d.heads * d.d, d.d, d.heads * d.d};
  d.k_rows = {d.tk * d.heads * d.d, d.d, d.heads * d.d};
  d.v_rows = {d.tk * d.heads * d.dv, d.dv, d.heads * d.dv};
  d.out_rows = {d.tq * d.heads * d.dv, d.dv, d.heads * d.dv};
}

/// Attention with a partial query block, a partial key block, the causal cut, optionally
/// dropout, and either an additive [tq, tk] mask broadcast over batch-heads (some keys blocked)
/// or, unmasked, two batches of three heads read where a projection's [B, T, H, d] output has
/// them (the path the GPT models take; the cuda backend runs it through batched GEMMs). The
/// backward runs on the reference forward's out and lse, so it is compared alone.
Outs run_attention(const Backend& b, DType t, bool backward, float dropout_p, bool masked) {
  AttentionDesc d;
  d.bh = masked ? 3 : 6; d.tq = 67; d.tk = 75; d.d = 24; d.dv = 20;
  d.dtype = t;
  d.scale = 0.2f;
  d.causal = true;
  d.dropout_p = dropout_p;
  d.seed = 31;
  if (!masked) {
    d.heads = 3;
    read_heads_inner(d);
  }
  const Buffer q = random_buffer(t, d.bh * d.tq * d.d, -2.0f, 2.0f, 60);
  const Buffer k = random_buffer(t, d.bh * d.tk * d.d, -2.0f, 2.0f, 61);
  const Buffer v = random_buffer(t, d.bh * d.tk * d.dv, -1.0f, 1.0f, 62);
  const Buffer m = random_buffer(DType::f32, d.tq * d.tk, -1.0f, 1.0f, 63);
  HostArray<float> mask(static_cast<std::size_t>(d.tq * d.tk));
  for (std::size_t i = 0; i < mask.size(); ++i) {
    mask[i] = i % 11 == 4 ? -INFINITY : m.get(static_cast<std::int64_t>(i));
  }
  const HostArray<std::int64_t> offsets(static_cast<std::size_t>(d.bh), 0);
  if (masked) {
    d.mask = mask.data();
    d.mask_offsets = offsets.data();
    d.mask_stride_q = d.tk;
    d.mask_stride_k = 1;
  }
  Buffer out(t, d.bh * d.tq * d.dv), lse(DType::f32, d.bh * d.tq);
  // Reordered f32 sums (d or tk terms) relative to values of order 1, plus one rounding.
  const double atol = 2e-5;
  if (!backward) {
    b.attention_forward(d, q.data(), k.data(), v.data(), out.data(), static_cast<float*>(lse.data()));
    return {close("out", std::move(out), atol, kTranscendental),
            close("lse", std::move(lse), atol, kTranscendental)};
  }
  ref::attention_forward(d, q.data(), k.data(), v.data(), out.data(), static_cast<float*>(lse.data()));
  const Buffer dout = random_buffer(t, d.bh * d.tq * d.dv, -1.0f, 1.0f, 64);
  Buffer dq(t, d.bh * d.tq * d.d), dk(t, d.bh * d.tk * d.d), dv(t, d.bh * d.tk * d.dv);
  b.attention_backward(d, q.data(), k.data(), v.data(), out.data(),
                       static_cast<const float*>(lse.data()), dout.data(), dq.data(), dk.data(),
                       dv.data());
  return {close("dq", std::move(dq), 4 * atol, kTranscendental),
          close("dk", std::move(dk), 4 * atol, kTranscendental),
          close("dv", std::move(dv), 4 * atol, kTranscendental)};
}

/// Attention under the 16-bit autocast spec (AttentionDesc::round_probs: P and dS rounded to t
/// before their products), bf16 and f16 only. Causal, two batches of `heads` heads read in the
/// projections' [B, T, H, d] layout, d = dv = width, tq = tk = t_len; the GPU flash kernel's
/// shapes: width 64 with t_len 200 leaves a partial 64-block; width 32 the other head size.
Outs run_attention_rounded(const Backend& b, DType t, bool backward, std::int64_t width,
                           std::int64_t t_len, float dropout_p) {
  AttentionDesc d;
  d.heads = 2;
  d.bh = 2 * d.heads; d.tq = t_len; d.tk = t_len; d.d = width; d.dv = width;
  d.dtype = t;
  d.scale = 1.0f / std::sqrt(static_cast<float>(width));
  d.causal = true;
  d.dropout_p = dropout_p;
  d.seed = 37;
  d.round_probs = true;
  read_heads_inner(d);
  const Buffer q = random_buffer(t, d.bh * d.tq * d.d, -2.0f, 2.0f, 70);
  const Buffer k = random_buffer(t, d.bh * d.tk * d.d, -2.0f, 2.0f, 71);
  const Buffer v = random_buffer(t, d.bh * d.tk * d.dv, -1.0f, 1.0f, 72);
  Buffer out(t, d.bh * d.tq * d.dv), lse(DType::f32, d.bh * d.tq);
  // The spec lets a kernel round e^(s - m) against its running max m and rescale later, so each
  // p_ij may be one rounding (<= eps(t) p_ij) away from the reference's: the output moves by at
  // most eps * sum_j p_ij |v_j| <= eps * max|v| = eps (|v| <= 1). Omitting the rounding moves
  // the output by a sum of independent half-ulp errors, typically inside this bound: the exact
  // rounding is pinned by the reference's test against a double evaluation of the formula and
  // the cpu kernel's test against the reference (tests/kernels/test_attention_round_probs.cpp);
  // this case holds every backend to the spec's allowance, on the flash kernel's shapes.
  // 2e-5 covers f32 sums in another order.
  const double eps = traits(t).epsilon;
  if (!backward) {
    b.attention_forward(d, q.data(), k.data(), v.data(), out.data(), static_cast<float*>(lse.data()));
    return {close("out", std::move(out), 2e-5 + eps, kTranscendental),
            close("lse", std::move(lse), 2e-5, kTranscendental)};
  }
  ref::attention_forward(d, q.data(), k.data(), v.data(), out.data(), static_cast<float*>(lse.data()));
  const Buffer dout = random_buffer(t, d.bh * d.tq * d.dv, -1.0f, 1.0f, 73);
  Buffer dq(t, d.bh * d.tq * d.d), dk(t, d.bh * d.tk * d.d), dv(t, d.bh * d.tk * d.dv);
  b.attention_backward(d, q.data(), k.data(), v.data(), out.data(),
                       static_cast<const float*>(lse.data()), dout.data(), dq.data(), dk.data(),
                       dv.data());
  // The backward rounds p = e^(s - lse) and ds, as the reference does; another exp (e.g. exp2
  // with a log2(e) factor on a GPU) or another summation order can flip the rounding of a p or
  // ds lying near a tie, moving a gradient by one ulp of t of one term. The gradients here are
  // of order 1 (|dout|, |v| <= 1, |q|, |k| <= 2): eps per element bounds a few such flips.
  return {close("dq", std::move(dq), 8e-5 + eps, kTranscendental),
          close("dk", std::move(dk), 8e-5 + eps, kTranscendental),
          close("dv", std::move(dv), 8e-5 + eps, kTranscendental)};
}

/// Attention reading q, k and v from one packed [B, T, 3 * H * w] buffer (a fused q|k|v
/// projection's output: token rows 3 H w apart, k and v at column offsets H w and 2 H w) and
/// writing dq, dk and dv into one such buffer, as packed_qkv_attention runs it. Causal, two
/// batches of `heads` heads, d = dv = width. round_probs (16-bit dtypes) with width 64 or 32 is
/// the shape the GPU's flash and cuDNN paths take (their strides are multiples of 8); f32 runs
/// the plain spec. Tolerances as run_attention_rounded's (and run_attention's for f32).
Outs run_attention_packed(const Backend& b, DType t, bool backward, std::int64_t width,
                          std::int64_t t_len, bool round_probs) {
  AttentionDesc d;
  d.heads = 2;
  const std::int64_t batches = 2, dim = d.heads * width, row = 3 * dim;
  d.bh = batches * d.heads; d.tq = t_len; d.tk = t_len; d.d = width; d.dv = width;
  d.dtype = t;
  d.scale = 1.0f / std::sqrt(static_cast<float>(width));
  d.causal = true;
  d.seed = 41;
  d.round_probs = round_probs;
  d.q_rows = d.k_rows = d.v_rows = {t_len * row, width, row};
  d.out_rows = {t_len * dim, width, dim};
  const Buffer qkv = random_buffer(t, batches * t_len * row, -2.0f, 2.0f, 80);
  const auto part = [&](const Buffer& buf, std::int64_t p) {
    return static_cast<const char*>(buf.data()) + p * dim * static_cast<std::int64_t>(size_of(t));
  };
  Buffer out(t, batches * t_len * dim), lse(DType::f32, d.bh * d.tq);
  const double eps = round_probs ? traits(t).epsilon : 0.0;
  if (!backward) {
    b.attention_forward(d, part(qkv, 0), part(qkv, 1), part(qkv, 2), out.data(),
                        static_cast<float*>(lse.data()));
    return {close("out", std::move(out), 2e-5 + eps, kTranscendental),
            close("lse", std::move(lse), 2e-5, kTranscendental)};
  }
  ref::attention_forward(d, part(qkv, 0), part(qkv, 1), part(qkv, 2), out.data(),
                         static_cast<float*>(lse.data()));
  const Buffer dout = random_buffer(t, batches * t_len * dim, -1.0f, 1.0f, 81);
  Buffer dqkv(t, batches * t_len * row);
  char* const g = static_cast<char*>(dqkv.data());
  const std::int64_t step = dim * static_cast<std::int64_t>(size_of(t));
  b.attention_backward(d, part(qkv, 0), part(qkv, 1), part(qkv, 2), out.data(),
                       static_cast<const float*>(lse.data()), dout.data(), g, g + step,
                       g + 2 * step);
  return {close("dqkv", std::move(dqkv), 8e-5 + eps, kTranscendental)};
}

// ---- transformer ops: the residual add fused into the layer norm ----

// A 16-bit delta onto the f32 residual stream (a transformer under autocast), and x, delta and
// the sum all in t. The sum is one add rounded once: exact; the norm as layer_norm_forward's case.
Outs run_add_layer_norm(const Backend& b, DType t) {
  const std::int64_t rows = 9, cols = 515, n = rows * cols;
  const Buffer w = random_buffer(DType::f32, cols, 0.5f, 1.5f, 65);
  const Buffer bias = random_buffer(DType::f32, cols, -0.5f, 0.5f, 66);
  Outs o;
  for (DType tx : {DType::f32, t}) {
    const std::string stream = tx == DType::f32 ? "f32 stream: " : "one dtype: ";
    const Buffer x = random_buffer(tx, n, -3.0f, 5.0f, 67);
    const Buffer delta = random_buffer(t, n, -2.0f, 2.0f, 68);
    Buffer sum(tx, n), y(t, n), mean(DType::f32, rows), rstd(DType::f32, rows);
    b.add_layer_norm_forward(x.data(), tx, delta.data(), t, rows, cols,
                             static_cast<const float*>(w.data()),
                             static_cast<const float*>(bias.data()), 1e-5f, sum.data(), tx,
                             y.data(), t, static_cast<float*>(mean.data()),
                             static_cast<float*>(rstd.data()));
    o.push_back(exact(stream + "sum", std::move(sum)));
    o.push_back(close(stream + "y", std::move(y), 1e-5, 4.0));
    o.push_back(close(stream + "mean", std::move(mean), 1e-6, 8.0));
    o.push_back(close(stream + "rstd", std::move(rstd), 1e-6, 8.0));
  }
  return o;
}

}  // namespace

void add_transformer_cases(std::vector<Case>& c) {
  const auto F = all_float();
  // attention.h
  for (bool bwd : {false, true}) {
    for (bool masked : {true, false}) {
      const std::string name = std::string(bwd ? "attention_backward" : "attention_forward") +
                               (masked ? "" : "_unmasked_heads");
      c.push_back({name, F, [bwd, masked](const Backend& b, DType t) {
                     Outs o = run_attention(b, t, bwd, 0.0f, masked);
                     for (Out& x : run_attention(b, t, bwd, 0.25f, masked)) o.push_back(std::move(x));
                     return o;
                   }});
    }
  }
  // attention.h, round_probs (16-bit dtypes only: the kernels refuse it for f32)
  for (bool bwd : {false, true}) {
    const std::string name = std::string(bwd ? "attention_backward" : "attention_forward");
    const std::vector<DType> halves{DType::bf16, DType::f16};
    c.push_back({name + "_round_probs_d64", halves, [bwd](const Backend& b, DType t) {
                   Outs o = run_attention_rounded(b, t, bwd, 64, 200, 0.0f);
                   for (Out& x : run_attention_rounded(b, t, bwd, 64, 200, 0.25f)) o.push_back(std::move(x));
                   return o;
                 }});
    c.push_back({name + "_round_probs_d32", halves, [bwd](const Backend& b, DType t) {
                   return run_attention_rounded(b, t, bwd, 32, 200, 0.0f);
                 }});
  }
  // attention.h, q, k, v as the rows of one packed buffer (packed_qkv_attention)
  for (bool bwd : {false, true}) {
    const std::string name = std::string(bwd ? "attention_backward" : "attention_forward") + "_packed_qkv";
    c.push_back({name, F, [bwd](const Backend& b, DType t) {
                   return run_attention_packed(b, t, bwd, 24, 67, false);
                 }});
    const std::vector<DType> halves{DType::bf16, DType::f16};
    c.push_back({name + "_round_probs_d64", halves, [bwd](const Backend& b, DType t) {
                   return run_attention_packed(b, t, bwd, 64, 200, true);
                 }});
    c.push_back({name + "_round_probs_d32", halves, [bwd](const Backend& b, DType t) {
                   return run_attention_packed(b, t, bwd, 32, 130, true);
                 }});
  }
  // transformer ops: embedding lookup
  for (bool bwd : {false, true}) {
    c.push_back({bwd ? "embedding_backward" : "embedding", F, [bwd](const Backend& b, DType t) {
                   return run_embedding(b, t, bwd);
                 }});
  }
  c.push_back({"indices_from_values", F, [](const Backend& b, DType t) {
                 return run_indices_from_values(b, t);
               }});
  // transformer ops: attention masks
  c.push_back({"masked_fill", F, [](const Backend& b, DType t) { return run_masked_fill(b, t); }});
  c.push_back({"add_layer_norm_forward", F,
               [](const Backend& b, DType t) { return run_add_layer_norm(b, t); }});
}

}  // namespace mixprec::kernels::conformance
