#pragma once
/// Transformer layers: multi-head attention over scaled_dot_product_attention (scores and
/// softmax in fp32 whatever the compute dtype; blocked, so no T x T matrix is kept) and the
/// pre-LayerNorm block of GPT-2.
#include <cstdint>
#include <memory>

#include "mixprec/nn/layers.h"
#include "mixprec/nn/module.h"
#include "mixprec/nn/norm_layers.h"

namespace mixprec::nn {

/// Multi-head attention (PyTorch's nn.MultiheadAttention with batch_first). Inputs are
/// [B, T, d_model]; heads split d_model into n_heads slices of d_model / n_heads.
/// forward_inputs({query, key, value}) or ({query, key, value, mask}) with an additive f32 mask
/// broadcastable to [B, n_heads, Tq, Tk]; forward(x) is self-attention, forward_inputs({x, x, x}).
/// Parameters: qkv_proj (Linear(d_model, 3 * d_model): rows q, k, v, as GPT-2's c_attn and
/// PyTorch's in_proj_weight) and out_proj. Self-attention (query, key and value the same
/// tensor) runs qkv_proj as one GEMM and packed_qkv_attention on its output; cross-attention
/// runs each input through its third of qkv_proj (Linear::forward_rows). State dicts with the
/// separate q_proj, k_proj, v_proj of older versions load (upgrade_own_state).
/// causal: query i sees keys j <= i. dropout: on the attention probabilities in training, its
/// mask drawn from (seed, call count), so a re-run with the same count (activation
/// checkpointing) redraws the same mask.
class MultiHeadAttention : public Module {
 public:
  /// ValueError unless d_model and n_heads are >= 1, n_heads divides d_model, and dropout is
  /// in [0, 1).
  MultiHeadAttention(std::int64_t d_model, std::int64_t n_heads, bool causal = false,
                     float dropout = 0.0f, bool bias = true, std::uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  Tensor forward_inputs(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "MultiHeadAttention"; }
  std::int64_t heads() const { return heads_; }
  /// Number of forward calls in training mode so far (the dropout masks' counter).
  std::uint64_t calls() const { return calls_; }
  void set_calls(std::uint64_t calls) { calls_ = calls; }

 protected:
  /// The call counter: Module::random_state() saves it so a forward can be replayed.
  std::vector<std::uint64_t> own_random_state() const override { return {calls_}; }
  void set_own_random_state(std::span<const std::uint64_t> state) override { calls_ = state[0]; }
  /// Concatenates an older state's "q_proj.<x>", "k_proj.<x>" and "v_proj.<x>" (rows in that
  /// order) into "qkv_proj.<x>", for every <x> (weight, bias, and optimizer suffixes).
  void upgrade_own_state(std::map<std::string, Tensor>& state, const std::string& prefix,
                         std::vector<StateMerge>& merges) const override;

 private:
  // [B, T, d_model] -> [B, heads, T, head_dim], a view of x (no copy).
  Tensor split_heads(const Tensor& x) const;
  // Cross-attention: q, k, v from their own inputs through their rows of qkv_proj.
  Tensor attend_apart(const std::vector<Tensor>& inputs, const Tensor& mask, float dropout,
                      std::uint64_t stream);
  std::int64_t d_model_, heads_;
  bool causal_;
  float dropout_;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
  std::shared_ptr<Linear> qkv_, out_;
};

/// The layer that an older model's separate q, k or v projection ("blocks.0.attn.q_proj") is
/// part of now ("blocks.0.attn.qkv_proj"); "" for any other path. For the messages that refuse
/// a layer policy naming one: q, k and v are one Linear with one precision (and one fp8 scale),
/// so a policy that set them apart has no faithful mapping.
std::string fused_qkv_layer(const std::string& old_layer_path);

/// GPT-2's block, pre-LayerNorm: x + dropout(attn(ln1(x))), then h + dropout(mlp(ln2(h))) with
/// mlp = Linear(d, 4d), GELU (tanh approximation, as GPT-2), Linear(4d, d): the modules fc, act
/// and proj, run as one op (gelu_mlp, the same numbers) when nothing watches or changes their
/// calls and neither Linear is in fp8. Input and output [B, T, d_model].
class TransformerBlock : public Module {
 public:
  TransformerBlock(std::int64_t d_model, std::int64_t n_heads, bool causal = true,
                   float dropout = 0.0f, std::uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "TransformerBlock"; }

 private:
  // fc, act, proj: gelu_mlp, or the three modules' calls.
  Tensor mlp(const Tensor& x);
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<MultiHeadAttention> attn_;
  std::shared_ptr<Linear> fc_, proj_;
  std::shared_ptr<GELU> act_;
  std::shared_ptr<Dropout> drop_attn_, drop_mlp_;
};

}  // namespace mixprec::nn
