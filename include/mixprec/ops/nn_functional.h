#pragma once
/// Differentiable neural-network functions: matmul, linear, softmax, losses, dropout.
#include <cstdint>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// a [M, K] @ b [K, N] -> [M, N], or batched [B, M, K] @ [B, K, N]. a and b must share a dtype;
/// f32/bf16 run through oneDNN with f32 accumulation, f16 emulates Tensor Cores. fp8 operands
/// (both fp8, formats may differ) are decoded exactly to f32 and give an f32 result.
Tensor matmul(const Tensor& a, const Tensor& b);
/// c + a @ b with c broadcastable to [M, N] (a GEMM plus a matrix or a row).
Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b);
/// x [..., in] @ weight[out, in]^T + bias[out] -> [..., out]; x and weight share a dtype, bias
/// (optional) has that dtype or f32. fp8 x and weight are decoded to f32 (f32 result).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
/// Softmax along dim (only the last dimension is supported: transpose first otherwise);
/// computed in f32 with the row max subtracted, stored in x's dtype.
Tensor softmax(const Tensor& x, std::int64_t dim = -1);
/// Log-softmax along the last dimension (log-sum-exp in f32).
Tensor log_softmax(const Tensor& x, std::int64_t dim = -1);
/// Mean cross-entropy of logits [N, C] against class indices targets[N] in [0, C), with label
/// smoothing in [0, 1). Always an f32 scalar (log-sum-exp in f32 whatever the logits' dtype).
Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& targets,
                     float label_smoothing = 0.0f);
/// Mean squared error between prediction and target (same shape), computed and returned in f32.
Tensor mse_loss(const Tensor& prediction, const Tensor& target);
/// Inverted dropout: in training, zeroes each element with probability p (mask drawn from the
/// counter-based RNG at (seed, element index)) and scales survivors by 1/(1-p); identity otherwise.
Tensor dropout(const Tensor& x, float p, bool training, std::uint64_t seed);

}  // namespace mixprec
