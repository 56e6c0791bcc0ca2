#include "mixprec/nn/transformer.h"

#include "mixprec/core/error.h"
#include "mixprec/ops/attention.h"
#include "mixprec/ops/elementwise.h"

namespace mixprec::nn {

MultiHeadAttention::MultiHeadAttention(std::int64_t d_model, std::int64_t n_heads, bool causal,
                                       float dropout, bool bias, std::uint64_t seed)
    : d_model_(d_model), heads_(n_heads), causal_(causal), dropout_(dropout), seed_(seed) {
  MIXPREC_CHECK(d_model >= 1 && n_heads >= 1 && d_model % n_heads == 0, ValueError,
                "MultiHeadAttention",
                "n_heads must divide d_model (both >= 1), got d_model " << d_model << ", n_heads "
                                                                        << n_heads);
  MIXPREC_CHECK(dropout >= 0.0f && dropout < 1.0f, ValueError, "MultiHeadAttention",
                "dropout must be in [0, 1), got " << dropout);
  // Seeds spread so that no two projections share a weight stream.
  q_ = register_module("q_proj", std::make_shared<Linear>(d_model, d_model, bias, seed * 8 + 1));
  k_ = register_module("k_proj", std::make_shared<Linear>(d_model, d_model, bias, seed * 8 + 2));
  v_ = register_module("v_proj", std::make_shared<Linear>(d_model, d_model, bias, seed * 8 + 3));
  out_ = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, bias, seed * 8 + 4));
}

// [B, T, D] -> [B, H, T, D/H] as a view: attention reads the heads where the projection wrote
// them (scaled_dot_product_attention takes this layout without a copy, and its output and
// gradients keep it, so merging the heads back is a view too).
Tensor MultiHeadAttention::split_heads(const Tensor& x) const {
  const std::int64_t b = x.size(0), t = x.size(1);
  return x.reshape({b, t, heads_, d_model_ / heads_}).permute({0, 2, 1, 3});
}

Tensor MultiHeadAttention::forward(const Tensor& x) { return forward_inputs({x, x, x}); }

Tensor MultiHeadAttention::forward_inputs(const std::vector<Tensor>& inputs) {
  MIXPREC_CHECK(inputs.size() == 3 || inputs.size() == 4, ValueError, "MultiHeadAttention",
                "takes (query, key, value) or (query, key, value, mask), got " << inputs.size()
                                                                               << " inputs");
  const Tensor& query = inputs[0];
  for (std::size_t i = 0; i < 3; ++i) {
    MIXPREC_CHECK(inputs[i].defined() && inputs[i].dim() == 3 && inputs[i].size(2) == d_model_,
                  ShapeError, "MultiHeadAttention",
                  "query, key and value must be [B, T, " << d_model_ << "]; input " << i << " is "
                      << (inputs[i].defined() ? to_string(inputs[i].shape()) : "undefined"));
  }
  const Tensor mask = inputs.size() == 4 ? inputs[3] : Tensor();
  const bool drop = is_training() && dropout_ > 0.0f;
  // One mask stream per call; the call counter is state, so recomputation can replay it.
  const std::uint64_t stream = seed_ * 0x9E3779B97F4A7C15ull + (drop ? calls_++ : 0);
  const Tensor attended = scaled_dot_product_attention(
      split_heads((*q_)(query)), split_heads((*k_)(inputs[1])), split_heads((*v_)(inputs[2])), mask,
      drop ? dropout_ : 0.0f, causal_, {}, stream);
  const std::int64_t b = query.size(0), t = query.size(1);
  return (*out_)(attended.permute({0, 2, 1, 3}).contiguous().reshape({b, t, d_model_}));
}

TransformerBlock::TransformerBlock(std::int64_t d_model, std::int64_t n_heads, bool causal,
                                   float dropout, std::uint64_t seed) {
  ln1_ = register_module("ln1", std::make_shared<LayerNorm>(d_model));
  attn_ = register_module("attn", std::make_shared<MultiHeadAttention>(d_model, n_heads, causal, dropout,
                                                                       true, seed * 4 + 1));
  drop_attn_ = register_module("drop_attn", std::make_shared<Dropout>(dropout, seed * 4 + 2));
  ln2_ = register_module("ln2", std::make_shared<LayerNorm>(d_model));
  fc_ = register_module("fc", std::make_shared<Linear>(d_model, 4 * d_model, true, seed * 4 + 3));
  act_ = register_module("act", std::make_shared<GELU>(GeluApproximation::tanh));
  proj_ = register_module("proj", std::make_shared<Linear>(4 * d_model, d_model, true, seed * 4 + 4));
  drop_mlp_ = register_module("drop_mlp", std::make_shared<Dropout>(dropout, seed * 4 + 5));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  // The residual add and ln2 in one pass; the block's last add is the next block's input (its
  // ln1 is a module of its own, so that add stays apart).
  const auto [h, normed] = ln2_->add_then_forward(x, (*drop_attn_)((*attn_)((*ln1_)(x))));
  return h + (*drop_mlp_)((*proj_)((*act_)((*fc_)(normed))));
}

}  // namespace mixprec::nn
