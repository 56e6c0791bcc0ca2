#pragma once
/// Scaled dot-product attention through cuDNN's fused SDPA (the cuDNN frontend's graph API),
/// forward and backward, for bf16 and f16 with f32 softmax statistics: the cuda backend's fast
/// path when cuDNN is loaded (cudnn_loader.h). attention.cu's dispatch calls it first and runs
/// its own kernels when it refuses or returns false.
///
/// cuDNN reads q, k, v and writes out, dq, dk, dv where the AttentionLayouts put them (tensors
/// [B, H, T, d] with the layouts' strides, B = bh / heads), so a projection's [B, T, H, d] heads
/// need no copy. lse is f32 contiguous [bh, tq]: cuDNN's softmax Stats, the natural-log
/// log-sum-exp of each row of scaled scores, which is kernels/attention.h's lse. The 16-bit spec
/// (AttentionDesc::round_probs) is what cuDNN does: P and dS rounded to the io dtype before their
/// products, statistics and sums in f32. The backward is cuDNN's deterministic algorithm.
#include "kernels/attention.h"

namespace mixprec::kernels::cuda {

/// Why cuDNN cannot take d (nullptr when it can): cuDNN not loaded (and why), dtype other than
/// bf16/f16, an additive mask, dropout, round_probs off (P in f32), a head size cuDNN does not
/// take (d and dv multiples of 8 up to 256), strides that are not multiples of 8 elements, or
/// heads not dividing bh. The text lives until the thread's next call.
const char* cudnn_attention_refusal(const AttentionDesc& d);

/// Runs the fused forward: out [bh, tq, dv] (out_rows) and lse [bh, tq] f32. Returns false,
/// having written nothing, when refused or when the graph cannot be built or run for this shape
/// (cudnn_attention_last_error() says why). The first call per shape builds the plan (slow:
/// warm-up steps take it); later calls reuse it.
bool cudnn_attention_forward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                             void* out, float* lse);

/// Runs the fused backward: dq, dk, dv (layouts and dtype of q, k, v) from the forward's inputs,
/// out, lse and dout. Overwrites dq, dk, dv (no accumulation). Returns false as the forward.
bool cudnn_attention_backward(const AttentionDesc& d, const void* q, const void* k,
                              const void* v, const void* out, const float* lse, const void* dout,
                              void* dq, void* dk, void* dv);

/// Why this thread's last cudnn_attention_forward/backward returned false ("" after a success):
/// for the verbose log.
const char* cudnn_attention_last_error();

/// cudnn_attention_refusal with `loaded_why_none` standing for the loader's answer (empty:
/// loaded; nullptr: not asked), so tests can check every refusal whatever this machine's cuDNN
/// is. (Not in a nested `detail`: that would hide kernels::detail from this namespace's code.)
const char* cudnn_attention_refusal_given(const AttentionDesc& d, const char* loaded_why_none);

}  // namespace mixprec::kernels::cuda
