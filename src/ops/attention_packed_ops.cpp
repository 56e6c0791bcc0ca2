// packed_qkv_attention: self-attention read straight from one [B, T, 3D] projection.
//
// Why an op of its own rather than scaled_dot_product_attention noticing that q, k and v are
// views of one tensor: the forward could read such views in place either way (the kernels'
// AttentionLayout places every operand's rows by independent batch, head and row strides), but
// the backward could not give one gradient back. The autograd engine hands each view's
// gradient to that view's own backward (slice, reshape, permute), which would each widen it to
// the full [B, T, 3D] with zeros and add the three: a concatenation and two adds of the whole
// projection's size, the very work the fused projection is meant to remove. Taking the packed
// tensor as the op's one input, the node writes dq, dk and dv strided into one [B, T, 3D]
// gradient, which goes to the projection's linear node as it is: one GEMM for dW, one for dx.
#include <string>

#include "kernels/attention.h"
#include "kernels/copy.h"
#include "mixprec/ops/attention.h"
#include "mixprec/runtime/autocast.h"
#include "ops/attention_common.h"
#include "ops/op_util.h"
#include "runtime/op_scope.h"

namespace mixprec {
namespace {

constexpr const char* kOp = "packed_qkv_attention";

using ops::detail::AttentionMask;

/// Element `elements` of t's memory (t.data_ptr() itself when t is empty: no arithmetic on a
/// null pointer).
void* element(const Tensor& t, std::int64_t elements) {
  if (t.numel() == 0) return t.data_ptr();
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<std::int64_t>(size_of(t.dtype()));
}

/// q, k, v of a [B, T, 3D] packed tensor with `heads` heads of w as the kernels read them: the
/// same row layout for all three ({T*3D, w, 3D}: batch, head and token strides), q at column 0,
/// k at D, v at 2D. The output and its gradient are [B, T, D] ({T*D, w, D}).
void place_packed(kernels::AttentionDesc& d, std::int64_t t, std::int64_t dim) {
  const std::int64_t w = d.d;
  d.q_rows = d.k_rows = d.v_rows = {t * 3 * dim, w, 3 * dim};
  d.out_rows = {t * dim, w, dim};
}

class PackedAttentionNode final : public runtime::Node {
 public:
  PackedAttentionNode(Tensor qkv, Tensor out, Tensor lse, AttentionMask mask,
                      kernels::AttentionDesc desc, std::int64_t dim)
      : qkv_(std::move(qkv)), out_(std::move(out)), lse_(std::move(lse)), mask_(std::move(mask)),
        desc_(desc), dim_(dim) {}
  const char* name() const override { return kOp; }
  void release_saved() override {
    qkv_ = out_ = lse_ = Tensor();
    mask_ = AttentionMask();
  }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const DType t = qkv_.dtype();
    // dout is read in out's layout, contiguous [B, T, D]: the output projection's input
    // gradient arrives so; anything else is laid out once.
    Tensor dy = dy_in.to(t);
    if (dy.strides() != out_.strides()) {
      Tensor laid = Tensor::empty(out_.shape(), t);
      kernels::copy(dy.shape(), {dy.data_ptr(), t, dy.strides()},
                    {laid.data_ptr(), t, laid.strides()});
      dy = laid;
    }
    // One gradient for the packed input: dq, dk, dv go where q, k, v were read from (the
    // kernels write every element of each, so nothing needs zeroing first).
    Tensor dqkv = Tensor::empty(qkv_.shape(), t);
    ops::detail::run_attention_backward(
        desc_, mask_, element(qkv_, 0), element(qkv_, dim_), element(qkv_, 2 * dim_),
        out_.data_ptr(), lse_, dy.data_ptr(), element(dqkv, 0), element(dqkv, dim_),
        element(dqkv, 2 * dim_),
        static_cast<double>(qkv_.nbytes() + 2 * out_.nbytes() + dqkv.nbytes()));
    return {dqkv};
  }

 private:
  Tensor qkv_, out_, lse_;
  AttentionMask mask_;
  kernels::AttentionDesc desc_;
  std::int64_t dim_;  // D: where k and v start in a row of qkv
};

}  // namespace

Tensor packed_qkv_attention(const Tensor& qkv_arg, std::int64_t heads, const Tensor& attn_mask,
                            float dropout_p, bool is_causal, std::optional<float> scale,
                            std::uint64_t seed) {
  runtime::detail::OpScope prof(runtime::OpKind::packed_qkv_attention);
  ops::detail::require_defined(kOp, qkv_arg, "qkv");
  // The mask is not cast: it is read in f32 whatever its dtype.
  const std::vector<Tensor> cast_in =
      runtime::autocast_inputs(runtime::OpKind::packed_qkv_attention, {&qkv_arg});
  const Tensor& qkv_in = cast_in[0];
  MIXPREC_CHECK(qkv_in.dim() == 3 && qkv_in.size(2) > 0 && qkv_in.size(2) % 3 == 0, ShapeError,
                kOp,
                "qkv must be [B, T, 3 * D] (q, k and v side by side in each row), got "
                    << to_string(qkv_in.shape()));
  const std::int64_t b = qkv_in.size(0), t = qkv_in.size(1), dim = qkv_in.size(2) / 3;
  MIXPREC_CHECK(heads >= 1 && dim % heads == 0, ShapeError, kOp,
                "heads must be >= 1 and divide D = " << dim << " (qkv " << to_string(qkv_in.shape())
                                                     << "), got heads " << heads);
  require_compute_dtype(kOp, qkv_in.dtype());
  MIXPREC_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, ValueError, kOp,
                "dropout_p must be in [0, 1), got " << dropout_p);
  // A projection's output is contiguous already; anything else is packed once.
  const Tensor qkv = qkv_in.is_contiguous() ? qkv_in.detach() : qkv_in.detach().contiguous();
  const std::int64_t w = dim / heads, bh = b * heads;
  const Shape scores_shape{b, heads, t, t};
  AttentionMask mask = ops::detail::attention_mask(kOp, attn_mask, scores_shape, bh);
  kernels::AttentionDesc desc = ops::detail::attention_desc(mask, bh, t, t, w, w, qkv.dtype(),
                                                            scale, is_causal, dropout_p, seed);
  desc.heads = heads;
  place_packed(desc, t, dim);
  Tensor out = Tensor::empty({b, t, dim}, qkv.dtype());
  Tensor lse = Tensor::empty({bh, t}, DType::f32);  // the only saved statistic: O(T)
  kernels::attention_forward(desc, element(qkv, 0), element(qkv, dim), element(qkv, 2 * dim),
                             out.data_ptr(), static_cast<float*>(lse.data_ptr()));
  ops::detail::add_forward_work(desc, static_cast<double>(qkv.nbytes() + out.nbytes()));
  ops::detail::record<PackedAttentionNode>(out, {&qkv_in}, qkv, out.detach(), lse,
                                           std::move(mask), desc, dim);
  prof.done(out, {&qkv_in});
  return out;
}

}  // namespace mixprec
