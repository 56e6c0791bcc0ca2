// The attention ops' shared pieces (attention_common.h): the mask's broadcast as per-batch-head
// offsets, the descriptor, and the backward kernel call.
#include "ops/attention_common.h"

#include <cmath>

#include "core/device_graph.h"

#include "mixprec/runtime/attention_precision.h"
#include "ops/op_util.h"
#include "runtime/op_scope.h"

namespace mixprec::ops::detail {

AttentionMask attention_mask(const char* op, const Tensor& attn_mask, const Shape& scores_shape,
                             std::int64_t bh) {
  AttentionMask m;
  if (!attn_mask.defined()) return m;
  mixprec::require_compute_dtype(op, attn_mask.dtype());
  bool fits = attn_mask.dim() <= static_cast<std::int64_t>(scores_shape.size());
  for (std::int64_t i = 1; fits && i <= attn_mask.dim(); ++i) {
    const std::int64_t s = attn_mask.size(-i);
    fits = s == 1 || s == scores_shape[scores_shape.size() - static_cast<std::size_t>(i)];
  }
  MIXPREC_CHECK(fits, ShapeError, op,
                "attn_mask " << to_string(attn_mask.shape())
                             << " does not broadcast to the scores' shape "
                             << to_string(scores_shape));
  m.mask = attn_mask.detach().to(DType::f32).contiguous();
  const Shape strides = broadcast_strides(m.mask, scores_shape);
  const std::size_t nd = scores_shape.size();
  m.stride_q = strides[nd - 2];
  m.stride_k = strides[nd - 1];
  m.offsets.resize(static_cast<std::size_t>(bh));
  for (std::int64_t b = 0; b < bh; ++b) {  // b as a multi-index over the leading dimensions
    std::int64_t rest = b, off = 0;
    for (std::size_t dim = nd - 2; dim-- > 0;) {
      off += (rest % scores_shape[dim]) * strides[dim];
      rest /= scores_shape[dim];
    }
    m.offsets[static_cast<std::size_t>(b)] = off;
  }
  m.device_offsets = upload_indices(m.offsets, "attention mask offsets");
  return m;
}

namespace {

void point_at_mask(kernels::AttentionDesc& d, const AttentionMask& m) {
  d.mask = nullptr;
  d.mask_offsets = nullptr;
  d.mask_stride_q = d.mask_stride_k = 0;
  if (!m.mask.defined()) return;
  d.mask = static_cast<const float*>(m.mask.data_ptr());
  d.mask_offsets = static_cast<const std::int64_t*>(m.device_offsets->data());
  d.mask_stride_q = m.stride_q;
  d.mask_stride_k = m.stride_k;
}

}  // namespace

kernels::AttentionDesc attention_desc(const AttentionMask& mask, std::int64_t bh, std::int64_t tq,
                                      std::int64_t tk, std::int64_t d, std::int64_t dv, DType dtype,
                                      std::optional<float> scale, bool causal, float dropout_p,
                                      std::uint64_t seed) {
  kernels::AttentionDesc desc;
  point_at_mask(desc, mask);
  desc.bh = bh; desc.tq = tq; desc.tk = tk; desc.d = d; desc.dv = dv;
  desc.dtype = dtype;
  desc.scale = scale.has_value() ? *scale : 1.0f / std::sqrt(static_cast<float>(d));
  desc.causal = causal;
  desc.dropout_p = dropout_p;
  desc.seed = seed;
  if (dropout_p > 0.0f) {
    // The seed is the host's per call: a captured graph would replay one dropout mask.
    mixprec::detail::note_capture_refusal(
        "attention's dropout draws from a seed the host picks at each call, which a graph would "
        "replay unchanged: train without dropout or with --cuda-graphs off");
  }
  // The 16-bit spec (P and dS rounded to the compute dtype) unless the user asked for highest;
  // an f32 call keeps f32 throughout (the kernels reject round_probs there).
  desc.round_probs = dtype != DType::f32 &&
                     runtime::attention_precision() != runtime::AttentionPrecision::highest;
  return desc;
}

void add_forward_work(const kernels::AttentionDesc& d, double bytes) {
  // 2 GEMM-like products of bh * tq * tk * (d or dv) multiply-adds each.
  runtime::detail::add_work(2.0 * static_cast<double>(d.bh * d.tq * d.tk) *
                                static_cast<double>(d.d + d.dv),
                            bytes);
}

void run_attention_backward(const kernels::AttentionDesc& forward, const AttentionMask& mask,
                            const void* q, const void* k, const void* v, const void* out,
                            const Tensor& lse, const void* dout, void* dq, void* dk, void* dv,
                            double bytes) {
  kernels::AttentionDesc d = forward;  // round_probs: the forward's choice
  point_at_mask(d, mask);              // pointers into the node's own mask
  kernels::attention_backward(d, q, k, v, out, static_cast<const float*>(lse.data_ptr()), dout,
                              dq, dk, dv);
  // The products the gradients need: s = q k^T, dp = dout v^T, dv += p^T dout, dk += ds^T q,
  // dq += ds k (a kernel that recomputes s and dp for dq, as the cpu one does above its ds
  // budget, does more work than this counts).
  runtime::detail::add_work(2.0 * static_cast<double>(d.bh * d.tq * d.tk) *
                                static_cast<double>(3 * d.d + 2 * d.dv),
                            bytes);
}

}  // namespace mixprec::ops::detail
