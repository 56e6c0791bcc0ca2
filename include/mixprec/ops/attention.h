#pragma once
/// Scaled dot-product attention (PyTorch's torch.nn.functional.scaled_dot_product_attention),
/// and self-attention read straight from one packed q|k|v projection.
#include <cstdint>
#include <optional>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// softmax(q k^T * scale + attn_mask) v, differentiable in q, k and v.
///   q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv] -> [..., Tq, Dv]; the leading dimensions
///   (batch, heads, ...) must be equal, and q, k, v share one dtype (f32, bf16 or f16).
///   attn_mask: optional additive float mask broadcastable to [..., Tq, Tk] (-inf blocks a key);
///   it receives no gradient. mixprec has no boolean dtype: express "keep" masks as 0 / -inf.
///   dropout_p in [0, 1): dropout on the probabilities, keep factor 1/(1-p), mask drawn from the
///   counter-based RNG at (seed, element index of [..., Tq, Tk]); the backward regenerates it.
///   is_causal: key j is blocked for query i when j > i (top-left aligned, as PyTorch).
///   scale: defaults to 1/sqrt(D).
/// Scores and softmax are computed in f32 whatever the dtype (f16 logits beyond 65504 are fine);
/// the output has the input dtype. Computed in blocks (flash-attention style): memory is
/// O(T * block), never O(Tq * Tk); the forward saves only its output and an f32 log-sum-exp
/// per query row. A query row whose keys are all masked outputs 0 and passes 0 gradient
/// (PyTorch's math path gives NaN there). Under runtime::Autocast, q, k, v are cast to the region's
/// 16-bit dtype (lower_precision); the softmax stays in f32 inside.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, float dropout_p = 0.0f,
                                    bool is_causal = false, std::optional<float> scale = {},
                                    std::uint64_t seed = 0);

/// Multi-head self-attention on a packed projection, as GPT-2's c_attn leaves it:
///   qkv [B, T, 3 * D] holds each token's q, k and v side by side (columns [0, D), [D, 2D),
///   [2D, 3D)), each split into `heads` heads of w = D / heads columns -> [B, T, D], the heads'
///   outputs side by side (merged back). Equal to scaled_dot_product_attention on the three
///   slices split into heads ([B, heads, T, w]), with its output's heads merged, bit for bit:
///   the same kernels read q, k and v where they lie in qkv (no split copy), and the backward
///   writes dq, dk and dv into one [B, T, 3D] gradient, so the projection's backward is one
///   GEMM for its weight and one for its input. attn_mask broadcasts to [B, heads, T, T]; the
///   dropout mask is drawn at the same indices (batch-head b * heads + h). dtypes and scale as
///   scaled_dot_product_attention; its autocast row (and profiler rows) is packed_qkv_attention,
///   lower_precision as scaled_dot_product_attention's. ShapeError unless qkv is [B, T, 3 * D]
///   with heads >= 1 dividing D.
Tensor packed_qkv_attention(const Tensor& qkv, std::int64_t heads, const Tensor& attn_mask = {},
                            float dropout_p = 0.0f, bool is_causal = false,
                            std::optional<float> scale = {}, std::uint64_t seed = 0);

}  // namespace mixprec
