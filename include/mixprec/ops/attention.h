#pragma once
/// Scaled dot-product attention (PyTorch's torch.nn.functional.scaled_dot_product_attention).
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

}  // namespace mixprec
