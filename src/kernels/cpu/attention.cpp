// Blocked (flash-attention style) scaled dot-product attention; the vector building blocks are
// in attention_simd.cpp (Highway, every target), the per-element rules in
// spec/attention_rules.h. Nothing here ever holds more than one block of scores:
//  - forward, one task per (batch-head, block of kBlockQ query rows): the block's queries are
//    widened to f32 and transposed once, then every block of kBlockK keys is scored as a
//    transposed tile (keys as rows: s^T = k q^T, so the softmax statistics of the queries are
//    whole vectors) and folded into the queries' running max m, running sum l and f32 output
//    accumulator (the online softmax: when the max grows, l and the accumulator are rescaled by
//    e^(m_old - m_new)); acc += p v reads p^T through strides. The task writes the output rows
//    and lse = m + log(l).
//  - backward, flash-attention-2 style, in two passes so that no two tasks ever add into the
//    same gradient row (no atomics, no per-thread copies): pass A, one task per (batch-head,
//    key block), with k and v transposed once, recomputes p = exp(s - lse) for every query block
//    and accumulates dk, dv of its keys (dv += p^T dout, dk += ds^T q, both reading the
//    [query][key] tiles through strides); pass B, one task per (batch-head, query block),
//    accumulates dq = ds k. When the whole ds (f32, bh x tq x tk) fits the budget
//    (set_attention_ds_budget, 64 MiB), pass A keeps it and pass B is one product per tile;
//    above it pass B recomputes s, dp and ds (as transposed tiles, with q and dout transposed
//    once per task) as flash attention does (the price of O(T * block) memory). Both give the
//    same bits: every score and ds is the same sum in the same order either way.
// No tile is ever transposed in the inner loops: every product reads its left operand through
// strides (attn_simd::tile_product). Under is_causal, key blocks entirely after a query block's
// last row are skipped and only tiles that cross the diagonal are masked. Tasks are fixed by the
// shape and each sums in a fixed order, so results never depend on the thread count. Scratch
// per task: a few [block, d] f32 tiles and two [kBlockQ, kBlockK] score tiles.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/cpu/attention_bf16_pairs.h"
#include "kernels/cpu/attention_simd.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/growing_buffer.h"
#include "kernels/spec/attention_rules.h"
#include "mixprec/core/error.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels {
namespace {

namespace simd = cpu::attn_simd;
namespace attn_bf16 = cpu::attn_bf16;

/// Query rows per task and keys per inner block: a 64 x 64 f32 score tile is 16 KiB, so the
/// tiles of a task and its [64, d] operands stay in L2 for head sizes up to a few hundred.
/// Equal, so that a causal key block starts where a query block does.
constexpr std::int64_t kBlockQ = 64;
constexpr std::int64_t kBlockK = 64;
static_assert(kBlockQ == kBlockK && kBlockQ % 16 == 0);

/// f32 scratch rows are padded to a multiple of 16 floats (zeros), so the vector loops of every
/// x86 target run without tails.
std::int64_t padded(std::int64_t n) { return (n + 15) / 16 * 16; }
std::int64_t block_count(std::int64_t n, std::int64_t b) { return (n + b - 1) / b; }

/// The f32 tiles of one task, carved from a per-thread buffer that only grows (a step allocates
/// nothing). Tiles come uninitialised: widen() and widen_transposed() write their padding zeros
/// themselves, and accumulators are taken zeroed.
class TaskScratch {
 public:
  explicit TaskScratch(std::int64_t total) : total_(total) {
    thread_local cpu::GrowingBuffer arena;
    next_ = arena.get(static_cast<std::size_t>(total));
  }
  float* take(std::int64_t n) {
    taken_ += n;
    if (taken_ > total_) throw InternalError("attention", "task scratch sized too small");
    float* p = next_;
    next_ += n;
    return p;
  }
  float* zeroed(std::int64_t n) {
    float* p = take(n);
    std::fill(p, p + n, 0.0f);
    return p;
  }

 private:
  float* next_ = nullptr;
  std::int64_t total_ = 0, taken_ = 0;
};

/// Elements between consecutive rows of an operand with layout l and rows of width elements.
std::int64_t row_stride(const AttentionLayout& l, std::int64_t width) {
  return l.batch == 0 && l.head == 0 && l.row == 0 ? width : l.row;
}

/// Pair words of a task's packed bf16 operands (attn_bf16), per thread, grown only: slots 0
/// and 1 hold the score products' transposed right operands for the whole task, slots 2 and 3
/// (kProductLeft, kProductRight) the operands of one p or ds product at a time.
enum PairSlot { kProductLeft = 2, kProductRight = 3 };
std::uint32_t* pair_scratch(int slot, std::int64_t words) {
  thread_local std::vector<std::uint32_t> buffers[4];
  auto& v = buffers[slot];
  if (v.size() < static_cast<std::size_t>(words)) v.resize(static_cast<std::size_t>(words));
  return v.data();
}

/// Whether a call's two bf16-by-bf16 score products (q k^T, dout v^T) run as pair products.
bool use_pairs(const AttentionDesc& d) { return d.dtype == DType::bf16 && attn_bf16::available(); }
/// Whether the four products with p or ds do too: under the 16-bit spec those are bf16 values.
bool use_pair_products(const AttentionDesc& d) { return use_pairs(d) && d.round_probs; }

/// The right operand of a score product: a block of one operand's rows transposed, as f32
/// columns or, on the pair path, as bf16 pair words (attn_bf16), ldt floats or words a row.
struct ScoreRight {
  const float* f32 = nullptr;
  const std::uint32_t* words = nullptr;
  std::int64_t ldt = 0;
};

/// One operand of the call: its buffer, layout and sizes, and how to widen a block of its rows.
struct Operand {
  const void* base;
  const AttentionDesc& d;
  const AttentionLayout& layout;
  std::int64_t tlen, width;

  const void* row(std::int64_t b, std::int64_t r) const {
    return cpu::at(base, d.dtype, detail::row_start(d, layout, b, r, tlen, width));
  }
  /// Rows [row0, row0 + count) of batch-head b as f32 rows of ld floats.
  void widen(std::int64_t b, std::int64_t row0, std::int64_t count, float* dst,
             std::int64_t ld) const {
    simd::widen_rows(row(b, row0), d.dtype, count, width, stride(), dst, ld);
  }
  /// Rows [row0, row0 + count) transposed as the right operand of a score product: bf16 pair
  /// words (in pair scratch `slot`) on the pair path, else f32 columns in f32_dst.
  ScoreRight transposed(std::int64_t b, std::int64_t row0, std::int64_t count, bool pairs,
                        int slot, float* f32_dst, std::int64_t ldt) const {
    if (pairs) {
      std::uint32_t* const words = pair_scratch(slot, (width + 1) / 2 * ldt);
      attn_bf16::pack_pairs_transposed(bf16_rows(b, row0), count, width, stride(), words, ldt);
      return {nullptr, words, ldt};
    }
    simd::widen_rows_transposed(row(b, row0), d.dtype, count, width, stride(), f32_dst, ldt);
    return {f32_dst, nullptr, ldt};
  }
  /// Row r of batch-head b of a bf16 operand as bit patterns, the rows after it stride() apart:
  /// the left operand of the pair products, read where it lies.
  const std::uint16_t* bf16_rows(std::int64_t b, std::int64_t r) const {
    return static_cast<const std::uint16_t*>(row(b, r));
  }
  std::int64_t stride() const { return row_stride(layout, width); }
};

/// c[r * ldc + j] = scale * (left row r0 + r . right's column j) for r < m, j < n: one score
/// product. On the pair path (right holds pair words) the left rows are read as bf16 where they
/// lie; otherwise from left_f32, the same rows widened, ld_left floats apart.
void score_tile(const Operand& left, std::int64_t b, std::int64_t r0, std::int64_t m,
                const float* left_f32, std::int64_t ld_left, const ScoreRight& right,
                std::int64_t n, float scale, float* c, std::int64_t ldc) {
  if (right.words != nullptr) {
    attn_bf16::scores(left.bf16_rows(b, r0), left.stride(), m, left.width, right.words, right.ldt,
                      n, scale, c, ldc);
  } else {
    simd::tile_product(left_f32, ld_left, 1, m, left.width, right.f32, right.ldt, n, scale, c,
                       ldc, false);
  }
}

/// c[r * ldc + j] += sum over k < kdim of left(r, k) right[k][j] for r < m, j < n, on the pair
/// products: left is a rounded f32 tile (bf16 values) whose element (r, k) is at
/// left_tile[k * ld_left + r] (a transposed tile, pairs of k across its rows) or, when
/// pairs_in_rows, at left_tile[r * ld_left + k]; right is kdim bf16 rows of an operand (rows
/// [row0, row0 + kdim) of batch-head b), interleaved two by two. n = ldc, padded.
void pair_tile_product(const float* left_tile, std::int64_t ld_left, bool pairs_in_rows,
                       std::int64_t m, std::int64_t m_padded, std::int64_t kdim,
                       const Operand& right, std::int64_t b, std::int64_t row0, float* c,
                       std::int64_t ldc) {
  const std::int64_t pairs = (kdim + 1) / 2;
  std::uint32_t* const aw = pair_scratch(kProductLeft, pairs * m_padded);
  std::uint32_t* const bw = pair_scratch(kProductRight, pairs * ldc);
  attn_bf16::pack_row_pairs(right.bf16_rows(b, row0), kdim, right.width, right.stride(), bw, ldc,
                            ldc);
  if (pairs_in_rows) {  // word (r, p) at aw[r * pairs + p]
    attn_bf16::pack_f32_pairs_in_rows(left_tile, m, ld_left, kdim, aw, pairs);
    attn_bf16::pair_product(aw, pairs, 1, m, pairs, bw, ldc, ldc, c, ldc);
  } else {  // word (r, p) at aw[p * m_padded + r]
    attn_bf16::pack_f32_row_pairs(left_tile, kdim, ld_left, m_padded, aw, m_padded);
    attn_bf16::pair_product(aw, 1, m_padded, m, pairs, bw, ldc, ldc, c, ldc);
  }
}

/// An operand widened once per call into f32 rows of ld floats ([bh][t] order, padding zeros),
/// in a buffer of the calling thread that only grows (slot: one per operand kind): tiles point
/// into it instead of widening a block again for every task that reads it.
class Widened {
 public:
  Widened(const Operand& o, std::int64_t ld, int slot) : ld_(ld), tlen_(o.tlen) {
    thread_local cpu::GrowingBuffer buffers[4];
    data_ = buffers[slot].get(static_cast<std::size_t>(o.d.bh * o.tlen * ld));
    const std::int64_t blocks = block_count(o.tlen, kBlockK);
    cpu::parallel_for(o.d.bh * blocks, o.d.bh * o.tlen * ld >= cpu::kParallelMinWork,
                      [&](std::int64_t task) {
                        const std::int64_t b = task / blocks, r0 = task % blocks * kBlockK;
                        o.widen(b, r0, std::min(kBlockK, o.tlen - r0), rows_mut(b, r0), ld);
                      });
  }
  /// Row r0 of batch-head b; the rows after it follow ld floats apart.
  const float* rows(std::int64_t b, std::int64_t r0) const { return data_ + (b * tlen_ + r0) * ld_; }

 private:
  float* rows_mut(std::int64_t b, std::int64_t r0) { return data_ + (b * tlen_ + r0) * ld_; }
  float* data_ = nullptr;
  std::int64_t ld_, tlen_;
};
enum WidenedSlot { kSlotQ, kSlotK, kSlotV, kSlotDout };

/// Writes f32 rows (ld floats apart) times row_scale[r] to rows [row0, row0 + count) of
/// batch-head b of an output with layout l.
void narrow_rows(const AttentionDesc& d, void* base, const AttentionLayout& l, std::int64_t tlen,
                 std::int64_t width, std::int64_t b, std::int64_t row0, std::int64_t count,
                 const float* src, std::int64_t ld, const float* row_scale) {
  simd::narrow_rows(src, ld, count, width, row_scale,
                    cpu::at(base, d.dtype, detail::row_start(d, l, b, row0, tlen, width)),
                    d.dtype, row_stride(l, width));
}

/// Whether the tile of query rows [i0, i0 + ni) and keys [j0, j0 + nj) needs the causal cut
/// or the mask at all.
bool tile_is_masked(const AttentionDesc& d, std::int64_t i0, std::int64_t j0, std::int64_t nj) {
  return d.mask != nullptr || (d.causal && j0 + nj - 1 > i0);
}

/// Applies the causal cut and the mask to a tile of scores of query rows i0.. and keys j0..;
/// element (r, c) is at s[r * lds + c], or s[c * lds + r] when keys_are_rows.
void mask_tile(const AttentionDesc& d, std::int64_t b, std::int64_t i0, std::int64_t ni,
               std::int64_t j0, std::int64_t nj, float* s, std::int64_t lds, bool keys_are_rows) {
  if (!tile_is_masked(d, i0, j0, nj)) return;
  if (d.mask == nullptr) {  // the causal cut alone: key j > query i is -inf, whole runs at once
    if (keys_are_rows) {  // key j0 + c sees no query before it
      for (std::int64_t c = 0; c < nj; ++c) {
        std::fill(s + c * lds, s + c * lds + std::clamp<std::int64_t>(j0 + c - i0, 0, ni),
                  -INFINITY);
      }
    } else {  // query i0 + r sees no key after it
      for (std::int64_t r = 0; r < ni; ++r) {
        std::fill(s + r * lds + std::clamp<std::int64_t>(i0 + r + 1 - j0, 0, nj), s + r * lds + nj,
                  -INFINITY);
      }
    }
    return;
  }
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
    cpu::philox_fill(d.seed, offset, bits.data(), static_cast<std::size_t>(nj));
    for (std::int64_t c = 0; c < nj; ++c) {
      z[r * nj + c] = detail::dropout_factor_from_bits(d.dropout_p, bits[c]);
    }
  }
}

/// Multiplies element (r, c) of a tile (at x[r * ldx + c], or x[c * ldx + r] when
/// keys_are_rows) by the dropout factor z[r * nj + c].
void apply_dropout(const float* z, std::int64_t ni, std::int64_t nj, float* x, std::int64_t ldx,
                   bool keys_are_rows) {
  for (std::int64_t r = 0; r < ni; ++r) {
    for (std::int64_t c = 0; c < nj; ++c) {
      (keys_are_rows ? x[c * ldx + r] : x[r * ldx + c]) *= z[r * nj + c];
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

/// kBlockQ values: src[0..n) then fill (per-query statistics as whole vectors).
std::vector<float> padded_copy(const float* src, std::int64_t n, float fill) {
  std::vector<float> v(static_cast<std::size_t>(kBlockQ), fill);
  std::copy(src, src + n, v.begin());
  return v;
}

/// One verbose line: the vector target, whether the score products ran on vdpbf16ps, and why
/// faster code did not run.
void log_call(const char* op, const AttentionDesc& d, bool pairs, bool pair_products) {
  if (!verbose_enabled()) return;
  std::string impl = std::string(simd_target()) + " f32 tiles";
  const bool forward = std::string_view(op) == "attention_forward";
  if (pair_products) {
    impl += forward ? ", q k^T and p v on vdpbf16ps" : ", every product on vdpbf16ps";
  } else if (pairs) {
    impl += forward ? ", q k^T on vdpbf16ps" : ", q k^T and dout v^T on vdpbf16ps";
    impl += " (p and ds in f32: attention precision highest)";
  }
  std::string skipped = cpu::simd_cap_reason();
  if (d.dtype == DType::bf16 && !pairs) {
    if (!skipped.empty()) skipped += "; ";
    skipped += hardware_cpu_features().avx512_bf16
                   ? "vdpbf16ps score products: capped below avx512_bf16"
                   : "vdpbf16ps score products: this CPU has no AVX512_BF16";
  }
  verbose_log(op, name(d.dtype), impl, skipped);
}

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
  const Operand qo{q, d, d.q_rows, d.tq, d.d}, ko{k, d, d.k_rows, d.tk, d.d};
  const Operand vo{v, d, d.v_rows, d.tk, d.dv};
  const std::int64_t ldk = padded(d.d), ldv = padded(d.dv), qblocks = block_count(d.tq, kBlockQ);
  const bool dropout = d.dropout_p > 0.0f;
  const bool pairs = use_pairs(d), pair_products = use_pair_products(d);
  log_call("attention_forward", d, pairs, pair_products);
  std::optional<Widened> kw, vw;  // k and v in f32: the f32 products' operands
  if (!pairs) kw.emplace(ko, ldk, kSlotK);
  if (!pair_products) vw.emplace(vo, ldv, kSlotV);
  run_tasks(d, d.bh * qblocks, [&](std::int64_t task) {
    const std::int64_t b = task / qblocks, i0 = task % qblocks * kBlockQ;
    const std::int64_t ni = std::min(kBlockQ, d.tq - i0), nq = padded(ni);
    TaskScratch scratch(d.d * kBlockQ + kBlockQ * ldv + kBlockK * kBlockQ * (dropout ? 2 : 1) +
                        3 * kBlockQ);
    float* const qt = scratch.take(d.d * kBlockQ);
    float* const acc = scratch.zeroed(kBlockQ * ldv);
    float* const st = scratch.take(kBlockK * kBlockQ);
    float* const z = dropout ? scratch.take(kBlockQ * kBlockK) : nullptr;
    float* const m = scratch.take(kBlockQ);
    float* const l = scratch.zeroed(kBlockQ);
    float* const alpha = scratch.take(kBlockQ);
    std::fill(m, m + kBlockQ, -INFINITY);
    std::vector<std::uint32_t> bits;
    const ScoreRight qt_right = qo.transposed(b, i0, ni, pairs, 0, qt, kBlockQ);
    const std::int64_t keys = visible_keys(d, i0, ni);
    for (std::int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
      const std::int64_t nj = std::min(kBlockK, keys - j0);
      // s^T[key][query] = scale * (k q^T)
      score_tile(ko, b, j0, nj, kw ? kw->rows(b, j0) : nullptr, ldk, qt_right, nq, d.scale, st,
                 kBlockQ);
      mask_tile(d, b, i0, ni, j0, nj, st, kBlockQ, true);
      simd::online_softmax_columns(st, nj, kBlockQ, nq, m, l, alpha);
      for (std::int64_t r = 0; r < ni; ++r) {
        if (alpha[r] != 1.0f) simd::scale(acc + r * ldv, ldv, alpha[r]);
      }
      if (dropout) {  // the normaliser l counts every key; only the output sees the mask
        dropout_tile(d, b, i0, ni, j0, nj, bits, z);
        apply_dropout(z, ni, nj, st, kBlockQ, true);
      }
      // round_probs: e^(s - m) z against the running max, rounded to dtype after l took it
      // unrounded (attention.h allows the running max; a later rescale by alpha stays f32).
      if (d.round_probs) simd::round_rows(st, nj, kBlockQ, nq, d.dtype);
      // acc[query] += p v, p read through s^T's strides
      if (pair_products) {
        pair_tile_product(st, kBlockQ, false, ni, nq, nj, vo, b, j0, acc, ldv);
      } else {
        simd::tile_product(st, 1, kBlockQ, ni, nj, vw->rows(b, j0), ldv, ldv, 1.0f, acc, ldv,
                           true);
      }
    }
    float* const inv_l = alpha;  // alpha's scratch is free after the last key block
    for (std::int64_t r = 0; r < ni; ++r) {
      const bool empty = m[r] == -INFINITY;  // every key masked: output 0, lse +inf
      inv_l[r] = empty ? 0.0f : 1.0f / l[r];
      lse[b * d.tq + i0 + r] = empty ? INFINITY : m[r] + std::log(l[r]);
    }
    narrow_rows(d, out, d.out_rows, d.tq, d.dv, b, i0, ni, acc, ldv, inv_l);
  });
}

void attention_backward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                        const void* out, const float* lse, const void* dout, void* dq, void* dk,
                        void* dv) {
  detail::check_attention_desc("attention_backward", d);
  const DType t = d.dtype;
  const Operand qo{q, d, d.q_rows, d.tq, d.d}, ko{k, d, d.k_rows, d.tk, d.d};
  const Operand vo{v, d, d.v_rows, d.tk, d.dv}, go{dout, d, d.out_rows, d.tq, d.dv};
  const std::int64_t ldq = padded(d.d), ldv = padded(d.dv);
  const bool dropout = d.dropout_p > 0.0f;
  const bool pairs = use_pairs(d), pair_products = use_pair_products(d);
  log_call("attention_backward", d, pairs, pair_products);
  // q, k and dout in f32 for the f32 products; the pair products read them where they lie.
  std::optional<Widened> qw, kw, gw;
  if (!pair_products) qw.emplace(qo, ldq, kSlotQ), kw.emplace(ko, ldq, kSlotK), gw.emplace(go, ldv, kSlotDout);
  // D_i = dout_i . out_i for every row (O(T) f32; it equals sum_j p_ij dp_ij).
  std::vector<float> rowdot(static_cast<std::size_t>(d.bh * d.tq));
  parallel_for(d.bh * d.tq, d.bh * d.tq * d.dv >= kParallelMinWork, [&](std::int64_t row) {
    const std::int64_t o = detail::out_row(d, row / d.tq, row % d.tq);
    rowdot[row] = simd::typed_dot(at(dout, t, o), at(out, t, o), t, d.dv);
  });

  // ds kept for pass B when it fits the budget (thread-local, grows only: no allocation per
  // step in steady state), tile by tile: pass A stores each [query block][key block] tile as
  // it holds it ([query][key], kBlockK floats a row), contiguously, in (batch-head, key block,
  // query block) order; pass B reads it as the left operand of dq += ds k as it lies.
  const std::int64_t kblocks = block_count(d.tk, kBlockK), qblocks = block_count(d.tq, kBlockQ);
  constexpr std::int64_t kTile = kBlockK * kBlockQ;
  const auto ds_count = static_cast<std::size_t>(d.bh * kblocks * qblocks * kTile);
  const bool keep_ds = ds_count * sizeof(float) <= ds_budget().load(std::memory_order_relaxed);
  thread_local GrowingBuffer ds_buffer;
  float* const ds = keep_ds ? ds_buffer.get(ds_count) : nullptr;
  const auto ds_tile = [&](std::int64_t b, std::int64_t jb, std::int64_t ib) {
    return ds + ((b * kblocks + jb) * qblocks + ib) * kTile;
  };

  // Row scales of the gradients as they are written: dq and dk carry the score scale.
  const std::vector<float> grad_scale(static_cast<std::size_t>(kBlockQ), d.scale);
  const std::vector<float> unit(static_cast<std::size_t>(kBlockK), 1.0f);

  // Pass A: dk and dv, one task per (batch-head, key block).
  run_tasks(d, d.bh * kblocks, [&](std::int64_t task) {
    const std::int64_t b = task / kblocks, j0 = task % kblocks * kBlockK;
    const std::int64_t nj = std::min(kBlockK, d.tk - j0), nk = padded(nj);
    TaskScratch scratch((d.d + d.dv) * kBlockK + kBlockK * (ldq + ldv) +
                        kBlockQ * kBlockK * (dropout ? 3 : 2));
    float* const kt = scratch.take(d.d * kBlockK);
    float* const vt = scratch.take(d.dv * kBlockK);
    float* const dk_acc = scratch.zeroed(kBlockK * ldq);
    float* const dv_acc = scratch.zeroed(kBlockK * ldv);
    float* const p = scratch.take(kBlockQ * kBlockK);
    float* const dp = scratch.take(kBlockQ * kBlockK);
    float* const z = dropout ? scratch.take(kBlockQ * kBlockK) : nullptr;
    std::vector<std::uint32_t> bits;
    const ScoreRight kt_right = ko.transposed(b, j0, nj, pairs, 0, kt, kBlockK);
    const ScoreRight vt_right = vo.transposed(b, j0, nj, pairs, 1, vt, kBlockK);
    // Under is_causal no query row before j0 sees these keys.
    for (std::int64_t i0 = d.causal ? std::min(j0, d.tq) : 0; i0 < d.tq; i0 += kBlockQ) {
      const std::int64_t ni = std::min(kBlockQ, d.tq - i0);
      const float* const qf = qw ? qw->rows(b, i0) : nullptr;
      const float* const gf = gw ? gw->rows(b, i0) : nullptr;
      // p[query][key] = exp(scale * (q k^T) - lse), dp = dout v^T
      score_tile(qo, b, i0, ni, qf, ldq, kt_right, nk, d.scale, p, kBlockK);
      mask_tile(d, b, i0, ni, j0, nj, p, kBlockK, false);
      simd::exp_sub_rows(p, ni, kBlockK, nk, lse + b * d.tq + i0);
      score_tile(go, b, i0, ni, gf, ldv, vt_right, nk, 1.0f, dp, kBlockK);
      if (dropout) {
        dropout_tile(d, b, i0, ni, j0, nj, bits, z);
        apply_dropout(z, ni, nj, dp, kBlockK, false);
      }
      // dp becomes ds = p (dp z - D): dk's coefficients; then p becomes p z: dv's
      simd::softmax_grad(p, dp, ni, kBlockK, nk, rowdot.data() + b * d.tq + i0, true);
      if (dropout) apply_dropout(z, ni, nj, p, kBlockK, false);
      if (d.round_probs) {  // the products' coefficients p z and ds rounded to dtype (kept so)
        simd::round_rows(p, ni, kBlockK, nk, d.dtype);
        simd::round_rows(dp, ni, kBlockK, nk, d.dtype);
      }
      if (ds != nullptr) {  // pass B's coefficients: this tile as it lies
        std::copy(dp, dp + ni * kBlockK, ds_tile(b, j0 / kBlockK, i0 / kBlockQ));
      }
      // dv[key] += p^T dout, dk[key] += ds^T q: the tiles read through their strides
      if (pair_products) {
        pair_tile_product(p, kBlockK, false, nj, nk, ni, go, b, i0, dv_acc, ldv);
        pair_tile_product(dp, kBlockK, false, nj, nk, ni, qo, b, i0, dk_acc, ldq);
      } else {
        simd::tile_product(p, 1, kBlockK, nj, ni, gf, ldv, ldv, 1.0f, dv_acc, ldv, true);
        simd::tile_product(dp, 1, kBlockK, nj, ni, qf, ldq, ldq, 1.0f, dk_acc, ldq, true);
      }
    }
    narrow_rows(d, dk, d.k_rows, d.tk, d.d, b, j0, nj, dk_acc, ldq, grad_scale.data());
    narrow_rows(d, dv, d.v_rows, d.tk, d.dv, b, j0, nj, dv_acc, ldv, unit.data());
  });

  // Pass B: dq, one task per (batch-head, query block).
  if (ds != nullptr) {
    run_tasks(d, d.bh * qblocks, [&](std::int64_t task) {
      const std::int64_t b = task / qblocks, i0 = task % qblocks * kBlockQ;
      const std::int64_t ni = std::min(kBlockQ, d.tq - i0);
      TaskScratch scratch(kBlockQ * ldq);
      float* const dq_acc = scratch.zeroed(kBlockQ * ldq);
      const std::int64_t keys = visible_keys(d, i0, ni);
      for (std::int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
        const std::int64_t nj = std::min(kBlockK, keys - j0);
        const float* const tile = ds_tile(b, j0 / kBlockK, i0 / kBlockQ);
        if (pair_products) {
          pair_tile_product(tile, kBlockK, true, ni, padded(ni), nj, ko, b, j0, dq_acc, ldq);
        } else {
          simd::tile_product(tile, kBlockK, 1, ni, nj, kw->rows(b, j0), ldq, ldq, 1.0f, dq_acc,
                             ldq, true);
        }
      }
      narrow_rows(d, dq, d.q_rows, d.tq, d.d, b, i0, ni, dq_acc, ldq, grad_scale.data());
    });
    return;
  }
  std::optional<Widened> vw;  // v in f32: the f32 dp product's left operand
  if (!pairs) vw.emplace(vo, ldv, kSlotV);
  run_tasks(d, d.bh * qblocks, [&](std::int64_t task) {
    const std::int64_t b = task / qblocks, i0 = task % qblocks * kBlockQ;
    const std::int64_t ni = std::min(kBlockQ, d.tq - i0), nq = padded(ni);
    TaskScratch scratch((d.d + d.dv) * kBlockQ + kBlockQ * ldq +
                        kBlockK * kBlockQ * (dropout ? 3 : 2));
    float* const qt = scratch.take(d.d * kBlockQ);
    float* const gt = scratch.take(d.dv * kBlockQ);
    float* const dq_acc = scratch.zeroed(kBlockQ * ldq);
    float* const pt = scratch.take(kBlockK * kBlockQ);
    float* const dpt = scratch.take(kBlockK * kBlockQ);
    float* const z = dropout ? scratch.take(kBlockQ * kBlockK) : nullptr;
    std::vector<std::uint32_t> bits;
    const ScoreRight qt_right = qo.transposed(b, i0, ni, pairs, 0, qt, kBlockQ);
    const ScoreRight gt_right = go.transposed(b, i0, ni, pairs, 1, gt, kBlockQ);
    const std::vector<float> lse_i = padded_copy(lse + b * d.tq + i0, ni, INFINITY);
    const std::vector<float> di = padded_copy(rowdot.data() + b * d.tq + i0, ni, 0.0f);
    const std::int64_t keys = visible_keys(d, i0, ni);
    for (std::int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
      const std::int64_t nj = std::min(kBlockK, keys - j0);
      const float* const kf = kw ? kw->rows(b, j0) : nullptr;
      // p^T[key][query] and dp^T = v dout^T: pass A's tiles, transposed, with the same sums
      score_tile(ko, b, j0, nj, kf, ldq, qt_right, nq, d.scale, pt, kBlockQ);
      mask_tile(d, b, i0, ni, j0, nj, pt, kBlockQ, true);
      simd::exp_sub_columns(pt, nj, kBlockQ, nq, lse_i.data());
      score_tile(vo, b, j0, nj, vw ? vw->rows(b, j0) : nullptr, ldv, gt_right, nq, 1.0f, dpt,
                 kBlockQ);
      if (dropout) {
        dropout_tile(d, b, i0, ni, j0, nj, bits, z);
        apply_dropout(z, ni, nj, dpt, kBlockQ, true);
      }
      simd::softmax_grad(pt, dpt, nj, kBlockQ, nq, di.data(), false);
      if (d.round_probs) simd::round_rows(dpt, nj, kBlockQ, nq, d.dtype);  // pass A's rounding
      // dq[query] += ds k, ds read through ds^T's strides
      if (pair_products) {
        pair_tile_product(dpt, kBlockQ, false, ni, nq, nj, ko, b, j0, dq_acc, ldq);
      } else {
        simd::tile_product(dpt, 1, kBlockQ, ni, nj, kf, ldq, ldq, 1.0f, dq_acc, ldq, true);
      }
    }
    narrow_rows(d, dq, d.q_rows, d.tq, d.d, b, i0, ni, dq_acc, ldq, grad_scale.data());
  });
}

}  // namespace cpu
}  // namespace mixprec::kernels
