#pragma once
/// Scaled dot-product attention on raw buffers, forward and backward, with the softmax in f32
/// whatever the storage dtype.
///
/// Layout: q [bh, tq, d], k [bh, tk, d], v [bh, tk, dv], out and dout [bh, tq, dv] in
/// desc.dtype (f32, bf16 or f16), each contiguous row-major or with its rows placed by an
/// AttentionLayout; dq, dk, dv have the shapes, layouts and dtype of q, k, v. bh is batch * heads flattened (the op folds every leading dimension).
/// lse [bh, tq] is f32: the log-sum-exp of each row of scores, the forward's only saved
/// statistic (O(T)); the backward recomputes the probabilities from it. Score of (row i, key j):
///   s = scale * (q_i . k_j) + mask(b, i, j), and -inf where causal and j > i,
/// p = softmax_j(s); with dropout, p_ij is multiplied by z_ij = keep ? 1/(1-p) : 0, where
/// keep = uniform(seed, (b*tq + i)*tk + j) >= dropout_p (the counter-based RNG of
/// mixprec/core/random.h: the backward regenerates the mask, nothing is stored).
/// out_i = sum_j p_ij z_ij v_j.
///
/// A row whose every score is -inf (all keys masked) has no distribution: its output is 0, its
/// lse is stored as +inf (so exp(s - lse) = 0 in the backward without a branch) and every
/// gradient through it is 0 (PyTorch's math path gives NaN there; 0 keeps padded rows from
/// poisoning a whole batch).
///
/// The mask, when given, is f32 with element (b, i, j) at
/// mask[mask_offsets[b] + i * mask_stride_q + j * mask_stride_k] (stride 0 broadcasts a
/// dimension; the per-bh offsets let any broadcast of the leading dimensions through).
/// kernels::ref:: is the spec (one row of scores at a time); kernels::cpu:: computes in blocks,
/// flash-attention style, and never holds more than a block of scores (see attention.cpp).
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// Where the rows of one operand are: row i of batch-head bh (bh = batch * heads + head) starts
/// at element (bh / heads) * batch + (bh % heads) * head + i * row of its buffer, and its d (or
/// dv) elements follow contiguously. All zero (the default): contiguous [bh, t, width]. The
/// heads of a projection's output [B, T, H, d] are {T*H*d, d, H*d}: attention reads them where
/// the projection wrote them, with no split-heads copy, and writes its output the same way.
struct AttentionLayout {
  std::int64_t batch = 0, head = 0, row = 0;
};

/// Everything but the data pointers of one attention call.
struct AttentionDesc {
  std::int64_t bh = 0, tq = 0, tk = 0, d = 0, dv = 0;
  DType dtype = DType::f32;
  float scale = 1.0f;
  bool causal = false;
  const float* mask = nullptr;               ///< optional additive f32 mask (see above)
  const std::int64_t* mask_offsets = nullptr;  ///< [bh] element offsets; required with mask
  std::int64_t mask_stride_q = 0, mask_stride_k = 0;
  float dropout_p = 0.0f;  ///< in [0, 1)
  std::uint64_t seed = 0;
  /// Heads per batch (divides bh) and the operands' row layouts: dq, dk, dv have the layouts
  /// of q, k, v; dout has out's. lse is always contiguous [bh, tq].
  std::int64_t heads = 1;
  AttentionLayout q_rows, k_rows, v_rows, out_rows;
  /// The 16-bit autocast spec (FlashAttention-2/3, cuDNN and PyTorch's SDPA do the same): the
  /// probabilities and score gradients are rounded to dtype before the products that use them;
  /// softmax statistics and every sum stay f32. Only for dtype bf16 or f16 (the op sets it
  /// there unless attention precision is `highest`); false keeps P and dS in f32.
  ///  - forward: out_i = (sum_j r(pt_ij z_ij) v_j) / l_i with pt_ij = e^(s_ij - m_i),
  ///    l_i = sum_j pt_ij (unrounded), m_i the row max and r() rounding to dtype. A kernel that
  ///    tiles the row rounds e^(s_ij - m) against its running max m instead: the same function
  ///    up to that one rounding.
  ///  - backward: p_ij = e^(s_ij - lse_i); dv_j = sum_i r(p_ij z_ij) dout_i;
  ///    ds_ij = p_ij (dp_ij z_ij - D_i); dq_i = scale sum_j r(ds_ij) k_j,
  ///    dk_j = scale sum_i r(ds_ij) q_i.
  bool round_probs = false;

  /// Calls f(dtype): every operand but lse and the mask shares it (kernels/dtype_visit.h).
  template <class F>
  void for_each_dtype(F&& f) const { f(dtype); }
};

namespace ref {
/// out [bh, tq, dv] and lse [bh, tq] (f32) from q, k, v.
void attention_forward(const AttentionDesc& desc, const void* q, const void* k, const void* v,
                       void* out, float* lse);
/// dq, dk, dv from the forward's inputs, its out and lse, and dout [bh, tq, dv] (desc.dtype).
/// Flash-attention-2 style: D_i = sum(dout_i * out_i); dp_ij = z_ij (dout_i . v_j);
/// ds_ij = p_ij (dp_ij - D_i); dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i,
/// dv_j = sum_i p_ij z_ij dout_i.
void attention_backward(const AttentionDesc& desc, const void* q, const void* k, const void* v,
                        const void* out, const float* lse, const void* dout, void* dq, void* dk,
                        void* dv);
}  // namespace ref

namespace detail {
/// Throws ShapeError / DTypeError / ValueError (naming op) for a desc the kernels reject.
void check_attention_desc(const char* op, const AttentionDesc& desc);
}  // namespace detail

namespace cpu {
/// The most bytes the cpu backward may keep of ds (f32, bh x tq x tk) so that its dq pass needs
/// no second recomputation of scores and probabilities (default 64 MiB; above it, dq recomputes
/// them as flash attention does, in O(T * block) memory). The results are the same bits either
/// way. Returns the previous budget (tests, benchmarks).
std::size_t set_attention_ds_budget(std::size_t bytes);
}  // namespace cpu

/// The attention kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_ATTENTION_KERNELS(X) X(attention_forward) X(attention_backward)
MIXPREC_ATTENTION_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
