#pragma once
/// Scaled dot-product attention through batched cuBLASLt GEMMs (attention_gemm.cu): the cuda
/// backend's path for attention without an additive mask (the causal cut and dropout are
/// fine), which is what the GPT models run. attention.cu's flash-style kernels take the rest.
#include "kernels/attention.h"

namespace mixprec::kernels::cuda {

/// Whether the GEMM path takes d: no additive mask, every size positive, and at least 4096
/// scores per batch-head (smaller problems are launch-bound either way).
bool attention_takes_gemms(const AttentionDesc& d);

/// attention_forward (kernels/attention.h) for a desc attention_takes_gemms accepts.
void attention_forward_gemms(const AttentionDesc& d, const void* q, const void* k, const void* v,
                             void* out, float* lse);

/// attention_backward for a desc attention_takes_gemms accepts; rowdot [bh, tq] holds
/// D_i = dout_i . out_i (attention.cu computes it for both paths).
void attention_backward_gemms(const AttentionDesc& d, const void* q, const void* k,
                              const void* v, const float* lse, const float* rowdot,
                              const void* dout, void* dq, void* dk, void* dv);

}  // namespace mixprec::kernels::cuda
