#pragma once
/// Scaled dot-product attention on Tensor Cores (attention_flash.cu): flash-attention-2 style
/// kernels on mma.sync (bf16 or f16 operands, f32 accumulation and softmax statistics) for the
/// 16-bit autocast spec (AttentionDesc::round_probs: P and dS rounded to the dtype before their
/// products). The causal cut, an additive mask and dropout are the reference's own per-element
/// rules (spec/attention_rules.h). Deterministic: no atomics, every output element is summed by
/// one thread in a fixed order.
#include <initializer_list>

#include "kernels/attention.h"

namespace mixprec::kernels::cuda {

/// Why the Tensor-Core kernels cannot take this call (for the verbose log), or nullptr when
/// they can: bf16/f16 with round_probs, d == dv in {32, 64, 128}, and every operand's rows
/// 16-byte aligned (the kernels copy rows 16 bytes at a time): the layouts' strides, and the
/// buffers of the call (q, k, v, out forward; q, k, v, dout, dq, dk, dv backward).
const char* flash_attention_refusal(const AttentionDesc& d,
                                    std::initializer_list<const void*> buffers);

/// attention_forward (kernels/attention.h) for a call flash_attention_refusal accepts.
void flash_attention_forward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                             void* out, float* lse);

/// attention_backward for such a call; rowdot [bh, tq] holds D_i = dout_i . out_i.
void flash_attention_backward(const AttentionDesc& d, const void* q, const void* k,
                              const void* v, const float* lse, const float* rowdot,
                              const void* dout, void* dq, void* dk, void* dv);

}  // namespace mixprec::kernels::cuda
