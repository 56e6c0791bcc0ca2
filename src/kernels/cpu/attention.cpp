// Blocked (flash-attention style) scaled dot-product attention; the vector building blocks are
// in attention_simd.cpp (Highway, every target), the per-element rules in
// ref/attention_rules.h. Nothing here ever holds more than one block of scores:
//  - forward, one task per (batch-head, block of kBlockQ query rows): the block's queries are
//    widened to f32 once, then every block of kBlockK keys is scored and folded into the rows'
//    running max m, running sum l and f32 output accumulator (the online softmax: when the max
//    grows, l and the accumulator are rescaled by e^(m_old - m_new)). The task writes the
//    output rows and lse = m + log(l).
//  - backward, flash-attention-2 style, in two passes so that no two tasks ever add into the
//    same gradient row (no atomics, no per-thread copies): pass A, one task per (batch-head,
//    key block), recomputes p = exp(s - lse) for every query block and accumulates dk, dv of
//    its keys; pass B, one task per (batch-head, query block), accumulates dq = ds k. When the
//    whole ds (f32, bh x tq x tk) fits the budget (set_attention_ds_budget, 64 MiB), pass A
//    keeps it and pass B is one product per tile; above it pass B recomputes s, dp and ds as
//    flash attention does (the price of O(T * block) memory). Both give the same bits: ds is the
//    same sums in the same order either way.
// Under is_causal, key blocks entirely after a query block's last row are skipped. Tasks are
// fixed by the shape and each sums in a fixed order, so results never depend on the thread
// count. Scratch per task: a few [block, d] f32 tiles and two [kBlockQ, kBlockK] score tiles.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/attention_simd.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/growing_buffer.h"
#include "kernels/ref/attention_rules.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels {
namespace {

namespace simd = cpu::attn_simd;

/// Query rows per task and keys per inner block: a 64 x 64 f32 score tile is 16 KiB, so the
/// tiles of a task and its [64, d] operands stay in L2 for head sizes up to a few hundred.
constexpr std::int64_t kBlockQ = 64;
constexpr std::int64_t kBlockK = 64;

/// f32 scratch rows are padded to a multiple of 16 floats (zeros), so the vector loops of every
/// x86 target run without tails.
std::int64_t padded(std::int64_t n) { return (n + 15) / 16 * 16; }
std::int64_t block_count(std::int64_t n, std::int64_t b) { return (n + b - 1) / b; }

std::vector<float> zeros(std::int64_t n) { return std::vector<float>(static_cast<std::size_t>(n), 0.0f); }

/// Widens rows [row0, row0 + count) of batch-head b of an operand (dtype t, rows placed by
/// layout l; tlen rows of width elements per batch-head) into f32 rows of ld floats (the
/// padding keeps the zeros it was created with).
void load_rows(const void* base, DType t, const AttentionDesc& d, const AttentionLayout& l,
               std::int64_t tlen, std::int64_t b, std::int64_t row0, std::int64_t count,
               std::int64_t width, std::int64_t ld, float* dst) {
  for (std::int64_t r = 0; r < count; ++r) {
    simd::widen(cpu::at(base, t, detail::row_start(d, l, b, row0 + r, tlen, width)), t, width,
                dst + r * ld);
  }
}

/// Applies the causal cut and the mask to a tile of scores of query rows i0.. and keys j0..;
/// element (r, c) is at s[r * lds + c], or s[c * lds + r] when keys_are_rows.
void mask_tile(const AttentionDesc& d, std::int64_t b, std::int64_t i0, std::int64_t ni,
               std::int64_t j0, std::int64_t nj, float* s, std::int64_t lds, bool keys_are_rows) {
  if (!d.causal && d.mask == nullptr) return;
  for (std::int64_t r = 0; r < ni; ++r) {
    for (std::int64_t c = 0; c < nj; ++c) {
      float& x = keys_are_rows ? s[c * lds + r] : s[r * lds + c];
      x = detail::masked_score(d, b, i0 + r, j0 + c, x);
    }
  }
}

/// z[r * nj + c] = the dropout factor of (b, i0 + r, j0 + c): each row's bits are one
/// contiguous run of the counter-based stream, drawn with the vector Philox.
void dropout_tile(const AttentionDesc& d, std::int64_t b, std::int64_t i0, std::int64_t ni,
                  std::int64_t j0, std::int64_t nj, std::vector<std::uint32_t>& bits,
                  float* z) {
  bits.resize(static_cast<std::size_t>(nj));
  for (std::int64_t r = 0; r < ni; ++r) {
    const auto offset = static_cast<std::uint64_t>((b * d.tq + i0 + r) * d.tk + j0);
    fill_random_bits(d.seed, offset, bits.data(), static_cast<std::size_t>(nj));
    for (std::int64_t c = 0; c < nj; ++c) {
      z[r * nj + c] = detail::dropout_factor_from_bits(d.dropout_p, bits[c]);
    }
  }
}

/// Runs body(task) for task in [0, count) across threads when the whole call is big enough.
template <class Body>
void run_tasks(const AttentionDesc& d, std::int64_t count, Body&& body) {
  const std::int64_t work = d.bh * d.tq * std::max<std::int64_t>(d.tk, 1) * std::max(d.d, d.dv);
  cpu::parallel_for(count, work >= cpu::kParallelMinWork, body);
}

/// Keys a query block [i0, i0 + ni) can see: all of them, or up to its last row when causal.
std::int64_t visible_keys(const AttentionDesc& d, std::int64_t i0, std::int64_t ni) {
  return d.causal ? std::min(d.tk, i0 + ni) : d.tk;
}

void log_call(const char* op, DType t) { cpu::log_simd(op, name(t)); }

std::atomic<std::size_t>& ds_budget() {
  static std::atomic<std::size_t> bytes{std::size_t{64} << 20};
  return bytes;
}

}  // namespace

namespace cpu {

std::size_t set_attention_ds_budget(std::size_t bytes) { return ds_budget().exchange(bytes); }

void attention_forward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                       void* out, float* lse) {
  detail::check_attention_desc("attention_forward", d);
  log_call("attention_forward", d.dtype);
  const DType t = d.dtype;
  const std::int64_t ldq = padded(d.d), ldv = padded(d.dv), qblocks = block_count(d.tq, kBlockQ);
  const bool dropout = d.dropout_p > 0.0f;
  run_tasks(d, d.bh * qblocks, [&](std::int64_t task) {
    const std::int64_t b = task / qblocks, i0 = task % qblocks * kBlockQ;
    const std::int64_t ni = std::min(kBlockQ, d.tq - i0);
    std::vector<float> qf = zeros(kBlockQ * ldq), kf = zeros(kBlockK * ldq);
    std::vector<float> vf = zeros(kBlockK * ldv), acc = zeros(kBlockQ * ldv);
    std::vector<float> s = zeros(kBlockQ * kBlockK), z = zeros(dropout ? kBlockQ * kBlockK : 0);
    std::vector<float> m(kBlockQ, -INFINITY), l(kBlockQ, 0.0f);
    std::vector<std::uint32_t> bits;
    load_rows(q, t, d, d.q_rows, d.tq, b, i0, ni, d.d, ldq, qf.data());
    const std::int64_t keys = visible_keys(d, i0, ni);
    for (std::int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
      const std::int64_t nj = std::min(kBlockK, keys - j0);
      load_rows(k, t, d, d.k_rows, d.tk, b, j0, nj, d.d, ldq, kf.data());
      load_rows(v, t, d, d.v_rows, d.tk, b, j0, nj, d.dv, ldv, vf.data());
      simd::scores(qf.data(), ni, kf.data(), nj, ldq, d.scale, s.data(), kBlockK);
      mask_tile(d, b, i0, ni, j0, nj, s.data(), kBlockK, false);
      if (dropout) dropout_tile(d, b, i0, ni, j0, nj, bits, z.data());
      for (std::int64_t r = 0; r < ni; ++r) {
        float* sr = s.data() + r * kBlockK;
        const float mx = std::max(m[r], simd::row_max(sr, nj));
        if (mx == -INFINITY) {  // every key so far masked: nothing to add yet
          std::fill(sr, sr + nj, 0.0f);
          continue;
        }
        const float alpha = std::exp(m[r] - mx);  // 0 on the row's first unmasked block
        l[r] = l[r] * alpha + simd::exp_sub(sr, nj, mx);
        if (alpha != 1.0f) simd::scale(acc.data() + r * ldv, ldv, alpha);
        if (dropout) {  // the normaliser l counts every key; only the output sees the mask
          for (std::int64_t c = 0; c < nj; ++c) sr[c] *= z[r * nj + c];
        }
        m[r] = mx;
      }
      simd::accumulate_rows(s.data(), ni, nj, kBlockK, vf.data(), ldv, acc.data(), ldv);
    }
    for (std::int64_t r = 0; r < ni; ++r) {
      const std::int64_t row = b * d.tq + i0 + r;
      const bool empty = m[r] == -INFINITY;  // every key masked: output 0, lse +inf
      simd::narrow_scaled(acc.data() + r * ldv, d.dv, empty ? 0.0f : 1.0f / l[r],
                          at(out, t, detail::out_row(d, b, i0 + r)), t);
      lse[row] = empty ? INFINITY : m[r] + std::log(l[r]);
    }
  });
}

void attention_backward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                        const void* out, const float* lse, const void* dout, void* dq, void* dk,
                        void* dv) {
  detail::check_attention_desc("attention_backward", d);
  log_call("attention_backward", d.dtype);
  const DType t = d.dtype;
  const std::int64_t ldq = padded(d.d), ldv = padded(d.dv);
  const bool dropout = d.dropout_p > 0.0f;
  // D_i = dout_i . out_i for every row (O(T) f32; it equals sum_j p_ij dp_ij).
  std::vector<float> rowdot(static_cast<std::size_t>(d.bh * d.tq));
  parallel_for(d.bh * d.tq, d.bh * d.tq * d.dv >= kParallelMinWork, [&](std::int64_t row) {
    const std::int64_t o = detail::out_row(d, row / d.tq, row % d.tq);
    rowdot[row] = simd::typed_dot(at(dout, t, o), at(out, t, o), t, d.dv);
  });

  // ds kept for pass B when it fits the budget (thread-local, grows only: no allocation per
  // step in steady state).
  // Tile-major: pass A stores each [key block][query block] tile as it holds it (keys as rows),
  // contiguously; pass B transposes a tile in cache. (Storing ds row-major instead scattered
  // pass A's writes a row apart and made the bigger GPT slower than recomputing.)
  const std::int64_t kblocks = block_count(d.tk, kBlockK), qblocks = block_count(d.tq, kBlockQ);
  constexpr std::int64_t kTile = kBlockK * kBlockQ;
  const auto ds_count = static_cast<std::size_t>(d.bh * kblocks * qblocks * kTile);
  const bool keep_ds = ds_count * sizeof(float) <= ds_budget().load(std::memory_order_relaxed);
  thread_local GrowingBuffer ds_buffer;
  float* const ds = keep_ds ? ds_buffer.get(ds_count) : nullptr;
  const auto ds_tile = [&](std::int64_t b, std::int64_t jb, std::int64_t ib) {
    return ds + ((b * kblocks + jb) * qblocks + ib) * kTile;
  };

  // Pass A: dk and dv, one task per (batch-head, key block).
  run_tasks(d, d.bh * kblocks, [&](std::int64_t task) {
    const std::int64_t b = task / kblocks, j0 = task % kblocks * kBlockK;
    const std::int64_t nj = std::min(kBlockK, d.tk - j0);
    std::vector<float> kf = zeros(kBlockK * ldq), vf = zeros(kBlockK * ldv);
    std::vector<float> qf = zeros(kBlockQ * ldq), gf = zeros(kBlockQ * ldv);
    std::vector<float> dk_acc = zeros(kBlockK * ldq), dv_acc = zeros(kBlockK * ldv);
    std::vector<float> pt = zeros(kBlockK * kBlockQ), dpt = zeros(kBlockK * kBlockQ);
    std::vector<float> z = zeros(dropout ? kBlockQ * kBlockK : 0);
    std::vector<std::uint32_t> bits;
    load_rows(k, t, d, d.k_rows, d.tk, b, j0, nj, d.d, ldq, kf.data());
    load_rows(v, t, d, d.v_rows, d.tk, b, j0, nj, d.dv, ldv, vf.data());
    // Under is_causal no query row before j0 sees these keys.
    for (std::int64_t i0 = d.causal ? std::min(j0, d.tq) : 0; i0 < d.tq; i0 += kBlockQ) {
      const std::int64_t ni = std::min(kBlockQ, d.tq - i0);
      load_rows(q, t, d, d.q_rows, d.tq, b, i0, ni, d.d, ldq, qf.data());
      load_rows(dout, t, d, d.out_rows, d.tq, b, i0, ni, d.dv, ldv, gf.data());
      // Transposed tiles (keys as rows), so that each key's gradient row is one accumulate.
      simd::scores(kf.data(), nj, qf.data(), ni, ldq, d.scale, pt.data(), kBlockQ);
      mask_tile(d, b, i0, ni, j0, nj, pt.data(), kBlockQ, true);
      for (std::int64_t c = 0; c < nj; ++c) {
        simd::exp_sub_each(pt.data() + c * kBlockQ, ni, lse + b * d.tq + i0);
      }
      simd::scores(vf.data(), nj, gf.data(), ni, ldv, 1.0f, dpt.data(), kBlockQ);
      if (dropout) dropout_tile(d, b, i0, ni, j0, nj, bits, z.data());
      const float* di = rowdot.data() + b * d.tq + i0;
      for (std::int64_t c = 0; c < nj; ++c) {
        float* p = pt.data() + c * kBlockQ;   // becomes p * z: dv's coefficients
        float* g = dpt.data() + c * kBlockQ;  // becomes ds: dk's coefficients
        for (std::int64_t r = 0; r < ni; ++r) {
          const float zz = dropout ? z[r * nj + c] : 1.0f;
          g[r] = p[r] * (g[r] * zz - di[r]);
          p[r] *= zz;
        }
      }
      if (ds != nullptr) {  // pass B's coefficients: this tile, keys as rows
        std::copy(dpt.data(), dpt.data() + nj * kBlockQ, ds_tile(b, j0 / kBlockK, i0 / kBlockQ));
      }
      simd::accumulate_rows(pt.data(), nj, ni, kBlockQ, gf.data(), ldv, dv_acc.data(), ldv);
      simd::accumulate_rows(dpt.data(), nj, ni, kBlockQ, qf.data(), ldq, dk_acc.data(), ldq);
    }
    for (std::int64_t c = 0; c < nj; ++c) {
      simd::narrow_scaled(dk_acc.data() + c * ldq, d.d, d.scale,
                          at(dk, t, detail::k_row(d, b, j0 + c)), t);
      simd::narrow_scaled(dv_acc.data() + c * ldv, d.dv, 1.0f,
                          at(dv, t, detail::v_row(d, b, j0 + c)), t);
    }
  });

  // Pass B: dq, one task per (batch-head, query block).
  if (ds != nullptr) {
    run_tasks(d, d.bh * qblocks, [&](std::int64_t task) {
      const std::int64_t b = task / qblocks, i0 = task % qblocks * kBlockQ;
      const std::int64_t ni = std::min(kBlockQ, d.tq - i0);
      std::vector<float> kf = zeros(kBlockK * ldq), dq_acc = zeros(kBlockQ * ldq);
      std::vector<float> s = zeros(kBlockQ * kBlockK);
      const std::int64_t keys = visible_keys(d, i0, ni);
      for (std::int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
        const std::int64_t nj = std::min(kBlockK, keys - j0);
        load_rows(k, t, d, d.k_rows, d.tk, b, j0, nj, d.d, ldq, kf.data());
        const float* tile = ds_tile(b, j0 / kBlockK, i0 / kBlockQ);  // [key c][query r]
        for (std::int64_t r = 0; r < ni; ++r) {
          for (std::int64_t c = 0; c < nj; ++c) s[r * kBlockK + c] = tile[c * kBlockQ + r];
        }
        simd::accumulate_rows(s.data(), ni, nj, kBlockK, kf.data(), ldq, dq_acc.data(), ldq);
      }
      for (std::int64_t r = 0; r < ni; ++r) {
        simd::narrow_scaled(dq_acc.data() + r * ldq, d.d, d.scale,
                            at(dq, t, detail::q_row(d, b, i0 + r)), t);
      }
    });
    return;
  }
  run_tasks(d, d.bh * qblocks, [&](std::int64_t task) {
    const std::int64_t b = task / qblocks, i0 = task % qblocks * kBlockQ;
    const std::int64_t ni = std::min(kBlockQ, d.tq - i0);
    std::vector<float> qf = zeros(kBlockQ * ldq), gf = zeros(kBlockQ * ldv);
    std::vector<float> kf = zeros(kBlockK * ldq), vf = zeros(kBlockK * ldv);
    std::vector<float> dq_acc = zeros(kBlockQ * ldq);
    std::vector<float> s = zeros(kBlockQ * kBlockK), dp = zeros(kBlockQ * kBlockK);
    std::vector<float> z = zeros(dropout ? kBlockQ * kBlockK : 0);
    std::vector<std::uint32_t> bits;
    load_rows(q, t, d, d.q_rows, d.tq, b, i0, ni, d.d, ldq, qf.data());
    load_rows(dout, t, d, d.out_rows, d.tq, b, i0, ni, d.dv, ldv, gf.data());
    const float* di = rowdot.data() + b * d.tq + i0;
    const std::int64_t keys = visible_keys(d, i0, ni);
    for (std::int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
      const std::int64_t nj = std::min(kBlockK, keys - j0);
      load_rows(k, t, d, d.k_rows, d.tk, b, j0, nj, d.d, ldq, kf.data());
      load_rows(v, t, d, d.v_rows, d.tk, b, j0, nj, d.dv, ldv, vf.data());
      simd::scores(qf.data(), ni, kf.data(), nj, ldq, d.scale, s.data(), kBlockK);
      mask_tile(d, b, i0, ni, j0, nj, s.data(), kBlockK, false);
      simd::scores(gf.data(), ni, vf.data(), nj, ldv, 1.0f, dp.data(), kBlockK);
      if (dropout) dropout_tile(d, b, i0, ni, j0, nj, bits, z.data());
      for (std::int64_t r = 0; r < ni; ++r) {
        float* sr = s.data() + r * kBlockK;  // scores, then p, then ds
        simd::exp_sub(sr, nj, lse[b * d.tq + i0 + r]);
        const float* g = dp.data() + r * kBlockK;
        for (std::int64_t c = 0; c < nj; ++c) {
          const float zz = dropout ? z[r * nj + c] : 1.0f;
          sr[c] = sr[c] * (g[c] * zz - di[r]);
        }
      }
      simd::accumulate_rows(s.data(), ni, nj, kBlockK, kf.data(), ldq, dq_acc.data(), ldq);
    }
    for (std::int64_t r = 0; r < ni; ++r) {
      simd::narrow_scaled(dq_acc.data() + r * ldq, d.d, d.scale,
                          at(dq, t, detail::q_row(d, b, i0 + r)), t);
    }
  });
}

}  // namespace cpu
}  // namespace mixprec::kernels
