// scaled_dot_product_attention with autograd: argument checks, folding the leading dimensions
// into one batch-head axis, reading q, k, v where they lie, and the node that calls the blocked
// backward kernel with the saved output and log-sum-exp (the mask and the kernel calls they
// share with packed_qkv_attention: attention_common.h).
#include <cmath>
#include <string>

#include "kernels/attention.h"
#include "kernels/copy.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/ops/attention.h"
#include "ops/attention_common.h"
#include "ops/op_util.h"
#include "runtime/op_scope.h"

namespace mixprec {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

using ops::detail::AttentionMask;

/// An operand as the kernel reads it: a tensor whose memory its rows describe.
struct Operand {
  Tensor t;
  kernels::AttentionLayout rows;  ///< all zero: t is contiguous
  bool heads_inner = false;       ///< [B, H, T, w] viewed on [B, T, H, w] memory
};

/// Whether x ([B, H, T, w]) is a view of contiguous [B, T, H, w] memory: the heads of a
/// projection's output, reshaped and permuted, which attention reads without a copy.
bool heads_inner(const Tensor& x) {
  if (x.dim() != 4) return false;
  const Shape& s = x.strides();
  const std::int64_t h = x.size(1), t = x.size(2), w = x.size(3);
  return s[3] == 1 && s[1] == w && s[2] == h * w && s[0] == t * h * w && !x.is_contiguous();
}

/// x as the kernel takes it: itself when contiguous or heads_inner, else a contiguous copy.
Operand operand(const Tensor& x) {
  if (!heads_inner(x)) return {x.detach().contiguous(), {}, false};
  const std::int64_t h = x.size(1), t = x.size(2), w = x.size(3);
  return {x.detach(), {t * h * w, w, h * w}, true};
}

/// An uninitialised [B, H, T, w] tensor laid out as `like` (heads_inner or contiguous), so a
/// gradient or an output keeps its operand's memory order.
Tensor empty_like_layout(const Shape& shape, DType dtype, bool inner) {
  if (!inner) return Tensor::empty(shape, dtype);
  return Tensor::empty({shape[0], shape[2], shape[1], shape[3]}, dtype).permute({0, 2, 1, 3});
}

class AttentionNode final : public runtime::Node {
 public:
  AttentionNode(Operand q, Operand k, Operand v, Operand out, Tensor lse, AttentionMask mask,
                kernels::AttentionDesc desc)
      : q_(std::move(q)), k_(std::move(k)), v_(std::move(v)), out_(std::move(out)),
        lse_(std::move(lse)), mask_(std::move(mask)), desc_(desc) {}
  const char* name() const override { return kOp; }
  void release_saved() override {
    q_ = k_ = v_ = out_ = Operand();
    lse_ = Tensor();
    mask_ = AttentionMask();
  }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const DType t = q_.t.dtype();
    // dout is read in out's layout: the gradient of a heads-inner output usually arrives in it
    // (the merge of heads is a permute and a reshape); anything else is laid out so once.
    Tensor dy = dy_in.to(t);
    if (dy.strides() != out_.t.strides()) {
      Tensor laid = empty_like_layout(out_.t.shape(), t, out_.heads_inner);
      kernels::copy(dy.shape(), {dy.data_ptr(), t, dy.strides()},
                    {laid.data_ptr(), t, laid.strides()});
      dy = laid;
    }
    Tensor dq = empty_like_layout(q_.t.shape(), t, q_.heads_inner);
    Tensor dk = empty_like_layout(k_.t.shape(), t, k_.heads_inner);
    Tensor dv = empty_like_layout(v_.t.shape(), t, v_.heads_inner);
    ops::detail::run_attention_backward(
        desc_, mask_, q_.t.data_ptr(), k_.t.data_ptr(), v_.t.data_ptr(), out_.t.data_ptr(), lse_,
        dy.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
        static_cast<double>(q_.t.nbytes() + k_.t.nbytes() + v_.t.nbytes() + 2 * out_.t.nbytes() +
                            dq.nbytes() + dk.nbytes() + dv.nbytes()));
    return {dq, dk, dv};
  }

 private:
  Operand q_, k_, v_, out_;
  Tensor lse_;
  AttentionMask mask_;
  kernels::AttentionDesc desc_;
};

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  for (auto [t, arg] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    MIXPREC_CHECK(t->dim() >= 2, ShapeError, kOp,
                  arg << " must have at least 2 dimensions [..., T, D], got "
                      << to_string(t->shape()));
  }
  MIXPREC_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype(), DTypeError, kOp,
                "q, k and v must share one dtype, got " << name(q.dtype()) << ", "
                    << name(k.dtype()) << " and " << name(v.dtype())
                    << "; cast them, or run under runtime::Autocast which casts all three");
  require_compute_dtype(kOp, q.dtype());
  const Shape lead(q.shape().begin(), q.shape().end() - 2);
  MIXPREC_CHECK(k.dim() == q.dim() && v.dim() == q.dim() &&
                    Shape(k.shape().begin(), k.shape().end() - 2) == lead &&
                    Shape(v.shape().begin(), v.shape().end() - 2) == lead,
                ShapeError, kOp,
                "q, k and v must have the same leading (batch, head) dimensions, got q "
                    << to_string(q.shape()) << ", k " << to_string(k.shape()) << ", v "
                    << to_string(v.shape()));
  MIXPREC_CHECK(k.size(-1) == q.size(-1), ShapeError, kOp,
                "q and k must have the same last dimension D, got q " << to_string(q.shape())
                    << " and k " << to_string(k.shape()));
  MIXPREC_CHECK(v.size(-2) == k.size(-2), ShapeError, kOp,
                "k and v must have the same number of keys Tk, got k " << to_string(k.shape())
                    << " and v " << to_string(v.shape()));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_arg, const Tensor& k_arg, const Tensor& v_arg,
                                    const Tensor& attn_mask, float dropout_p, bool is_causal,
                                    std::optional<float> scale, std::uint64_t seed) {
  runtime::detail::OpScope prof(runtime::OpKind::scaled_dot_product_attention);
  ops::detail::require_defined(kOp, q_arg, "q");
  ops::detail::require_defined(kOp, k_arg, "k");
  ops::detail::require_defined(kOp, v_arg, "v");
  // The mask is not cast: it is read in f32 whatever its dtype.
  const std::vector<Tensor> cast_in =
      runtime::autocast_inputs(runtime::OpKind::scaled_dot_product_attention, {&q_arg, &k_arg, &v_arg});
  const Tensor& q = cast_in[0];
  const Tensor& k = cast_in[1];
  const Tensor& v = cast_in[2];
  check_inputs(q, k, v);
  MIXPREC_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, ValueError, kOp,
                "dropout_p must be in [0, 1), got " << dropout_p);
  const std::int64_t tq = q.size(-2), tk = k.size(-2), d = q.size(-1), dv = v.size(-1);
  Shape scores_shape(q.shape().begin(), q.shape().end() - 2);
  const std::int64_t bh = numel(scores_shape);
  scores_shape.push_back(tq);
  scores_shape.push_back(tk);
  AttentionMask mask = ops::detail::attention_mask(kOp, attn_mask, scores_shape, bh);
  kernels::AttentionDesc desc = ops::detail::attention_desc(
      mask, bh, tq, tk, d, dv, q.dtype(), scale, is_causal, dropout_p, seed);

  // q, k, v are read where they are: contiguous, or [B, H, T, w] views of [B, T, H, w] memory
  // (the projections' output with its heads split by reshape + permute: no copy); the output
  // takes q's order, so merging its heads back is free too.
  Operand qc = operand(q), kc = operand(k), vc = operand(v);
  if (q.dim() == 4) desc.heads = q.size(1);
  desc.q_rows = qc.rows;
  desc.k_rows = kc.rows;
  desc.v_rows = vc.rows;
  Shape out_shape = q.shape();
  out_shape.back() = dv;
  Tensor out = empty_like_layout(out_shape, q.dtype(), qc.heads_inner);
  if (qc.heads_inner) desc.out_rows = {tq * desc.heads * dv, dv, desc.heads * dv};
  Tensor lse = Tensor::empty({bh, tq}, DType::f32);  // the only saved statistic: O(T)
  kernels::attention_forward(desc, qc.t.data_ptr(), kc.t.data_ptr(), vc.t.data_ptr(),
                             out.data_ptr(), static_cast<float*>(lse.data_ptr()));
  ops::detail::add_forward_work(
      desc, static_cast<double>(qc.t.nbytes() + kc.t.nbytes() + vc.t.nbytes() + out.nbytes()));
  Operand saved_out{out.detach(), desc.out_rows, qc.heads_inner};
  ops::detail::record<AttentionNode>(out, {&q, &k, &v}, std::move(qc), std::move(kc),
                                     std::move(vc), std::move(saved_out), lse, std::move(mask),
                                     desc);
  prof.done(out, {&q, &k, &v});
  return out;
}

}  // namespace mixprec
