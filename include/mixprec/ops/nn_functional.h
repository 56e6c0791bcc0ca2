#pragma once
/// Differentiable neural-network functions: matmul, linear, the GELU MLP, softmax, losses,
/// dropout.
#include <cstdint>
#include <vector>

#include "mixprec/tensor/device_indices.h"
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
/// linear(gelu(linear(x, fc_weight, fc_bias), GeluApproximation::tanh), proj_weight,
/// proj_bias), a transformer's MLP, as one op: the GELU runs in the first GEMM's epilogue
/// (kernels::matmul_aux, which keeps its input, the memory GELU would keep) and its gradient
/// with the first bias's in the epilogue of the GEMM that computes the GELU's output gradient
/// (kernels::matmul_post_op_backward). The output, the saved tensors and every gradient are
/// the three ops' (the same bits on the ref, cpu and devsim backends). Shapes and dtypes as the
/// two linears: x [..., d], fc_weight [h, d], proj_weight [e, h], biases [h], [e] (optional);
/// autocast casts the five as linear's row says. fp8 operands run the three ops one by one.
Tensor gelu_mlp(const Tensor& x, const Tensor& fc_weight, const Tensor& fc_bias,
                const Tensor& proj_weight, const Tensor& proj_bias);
/// Softmax along dim (only the last dimension is supported: transpose first otherwise);
/// computed in f32 with the row max subtracted, stored in x's dtype.
Tensor softmax(const Tensor& x, std::int64_t dim = -1);
/// Log-softmax along the last dimension (log-sum-exp in f32).
Tensor log_softmax(const Tensor& x, std::int64_t dim = -1);
/// Mean cross-entropy of logits [N, C] against class indices targets[N] in [0, C), with label
/// smoothing in [0, 1). Always an f32 scalar (log-sum-exp in f32 whatever the logits' dtype).
Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& targets,
                     float label_smoothing = 0.0f);
/// cross_entropy for a caller that knows the gradient backward will bring the loss
/// (expected_grad, an f32 scalar on the logits' device; a training step's 1 * scale / accum):
/// the forward also computes the logits' gradient, in the same pass over the logits (llm.c's
/// fused classifier), and the node keeps that gradient (the logits' dtype) instead of the
/// logits, which die when the caller drops them. A backward whose dy has expected_grad's bits
/// returns the saved gradient, deciding on the device (no host read); any other dy gets
/// gradient * (dy / expected_grad), correct but rounded twice. Loss and gradient have the plain
/// op's bits. Without a gradient to compute (no_grad, logits that need none) it is the plain op.
Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& targets,
                     float label_smoothing, const Tensor& expected_grad);
/// The fused cross_entropy above with targets already on the logits' device (targets.count of
/// them, checked by the kernels as the host vector's are): no upload, so a captured graph can
/// contain it (train/step_graphs.h). The same bits.
Tensor cross_entropy(const Tensor& logits, const DeviceIndices& targets, float label_smoothing,
                     const Tensor& expected_grad);
/// Mean squared error between prediction and target (same shape), computed and returned in f32.
Tensor mse_loss(const Tensor& prediction, const Tensor& target);
/// Inverted dropout: in training, zeroes each element with probability p (mask drawn from the
/// counter-based RNG at (seed, element index)) and scales survivors by 1/(1-p); identity otherwise.
Tensor dropout(const Tensor& x, float p, bool training, std::uint64_t seed);

}  // namespace mixprec
