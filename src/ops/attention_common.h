#pragma once
// What the two attention ops share (scaled_dot_product_attention on q, k, v, and
// packed_qkv_attention on one [B, T, 3D] projection): the mask as the kernels read it, the
// descriptor of a call, and the backward kernel call with its work count. Only the operands'
// memory differs between the two; these pieces do not depend on it.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/attention.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::ops::detail {

/// The f32 mask and where each batch-head's [Tq, Tk] plane starts in it; the data pointers of
/// a desc built from it point into this object, which lives as long as the node that holds it.
struct AttentionMask {
  Tensor mask;  // f32 contiguous, at the user's shape (never expanded)
  std::vector<std::int64_t> offsets;
  std::shared_ptr<Storage> device_offsets;  // the offsets where the kernels read them
  std::int64_t stride_q = 0, stride_k = 0;
};

/// attn_mask checked against the scores' shape [..., Tq, Tk] (bh batch-heads) and laid out for
/// the kernels; an undefined attn_mask gives an empty AttentionMask. ShapeError / DTypeError
/// naming op when it does not broadcast or is not a float dtype.
AttentionMask attention_mask(const char* op, const Tensor& attn_mask, const Shape& scores_shape,
                             std::int64_t bh);

/// The call's descriptor with the mask's pointers (none for an empty mask), its sizes, dtype,
/// scale (1/sqrt(d) unless given), causal cut, dropout and the round_probs choice: the 16-bit
/// spec unless the user asked for highest attention precision; f32 keeps f32 throughout.
kernels::AttentionDesc attention_desc(const AttentionMask& mask, std::int64_t bh, std::int64_t tq,
                                      std::int64_t tk, std::int64_t d, std::int64_t dv, DType dtype,
                                      std::optional<float> scale, bool causal, float dropout_p,
                                      std::uint64_t seed);

/// Counts the forward's two products for the profiler (bytes: what the kernels read and write).
void add_forward_work(const kernels::AttentionDesc& d, double bytes);

/// Runs the backward kernel with the forward's desc, its mask pointers taken from `mask` (the
/// node's own copy), the saved round_probs choice (whatever the knob says now), and counts the
/// work. Pointers are where the kernels read or write each operand; dq, dk, dv take the layouts
/// of q, k, v and dout that of out.
void run_attention_backward(const kernels::AttentionDesc& forward, const AttentionMask& mask,
                            const void* q, const void* k, const void* v, const void* out,
                            const Tensor& lse, const void* dout, void* dq, void* dk, void* dv,
                            double bytes);

}  // namespace mixprec::ops::detail
