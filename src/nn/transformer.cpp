#include "mixprec/nn/transformer.h"

#include <set>

#include "mixprec/core/error.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/ops/attention.h"
#include "mixprec/ops/combine.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/runtime/node.h"

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
  // q, k and v in one projection, so self-attention computes them in one GEMM (and its
  // backward in one GEMM for the weight and one for the input).
  qkv_ = register_module("qkv_proj", std::make_shared<Linear>(d_model, 3 * d_model, bias, seed * 8 + 1));
  // Its rows come from the streams the three separate projections of earlier versions drew
  // (seeds spread so that no two share one): a model starts from the weights it started from
  // before q, k and v were fused, so seeds and runs reproduce.
  std::vector<Tensor> w, b;
  for (std::uint64_t part = 1; part <= 3; ++part) {
    const Linear separate(d_model, d_model, bias, seed * 8 + part);
    w.push_back(separate.weight());
    if (bias) b.push_back(separate.bias());
  }
  {
    runtime::NoGradGuard no_grad;
    std::map<std::string, Tensor> rows{{"weight", cat(w, 0)}};
    if (bias) rows.emplace("bias", cat(b, 0));
    qkv_->load_state_dict(rows);
  }
  out_ = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, bias, seed * 8 + 4));
}

void MultiHeadAttention::upgrade_own_state(std::map<std::string, Tensor>& state,
                                           const std::string& prefix,
                                           std::vector<StateMerge>& merges) const {
  static constexpr const char* kOld[] = {"q_proj", "k_proj", "v_proj"};
  // Every suffix an old projection holds: "weight", "bias", "weight.exp_avg", ...
  std::set<std::string> suffixes;
  for (const char* old : kOld) {
    const std::string p = prefix + old + ".";
    for (auto it = state.lower_bound(p); it != state.end() && it->first.starts_with(p); ++it) {
      suffixes.insert(it->first.substr(p.size()));
    }
  }
  if (suffixes.empty()) return;
  const std::string into = prefix + "qkv_proj.";
  runtime::NoGradGuard no_grad;
  for (const std::string& suffix : suffixes) {
    std::vector<Tensor> parts;
    for (const char* old : kOld) {
      const auto it = state.find(prefix + old + "." + suffix);
      MIXPREC_CHECK(it != state.end(), ValueError, "MultiHeadAttention",
                    "the state has an older layout's q_proj/k_proj/v_proj '" << suffix
                        << "' but lacks '" << prefix << old << "." << suffix
                        << "': the three load together, as the rows of '" << into << suffix << "'");
      parts.push_back(it->second);
    }
    MIXPREC_CHECK(parts[0].dim() >= 1 && parts[1].shape() == parts[0].shape() &&
                      parts[2].shape() == parts[0].shape(),
                  ShapeError, "MultiHeadAttention",
                  "'" << prefix << "q_proj." << suffix << "', k_proj and v_proj have shapes "
                      << to_string(parts[0].shape()) << ", " << to_string(parts[1].shape())
                      << " and " << to_string(parts[2].shape())
                      << "; they concatenate into '" << into << suffix << "' only when equal");
    MIXPREC_CHECK(state.count(into + suffix) == 0, ValueError, "MultiHeadAttention",
                  "the state has both '" << into << suffix << "' and the q_proj/k_proj/v_proj '"
                                         << suffix << "' it replaced; keep one of them");
    state[into + suffix] = cat(parts, 0);
    for (const char* old : kOld) state.erase(prefix + old + "." + suffix);
  }
  const std::string path = prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1);
  merges.push_back({join_path(path, "qkv_proj"),
                    {join_path(path, "q_proj"), join_path(path, "k_proj"), join_path(path, "v_proj")}});
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
  const float p = drop ? dropout_ : 0.0f;
  // Self-attention: one GEMM gives q, k and v side by side in [B, T, 3 * d_model], which
  // attention reads in place and whose gradient it writes as one tensor.
  const bool self = inputs[1].is_same(query) && inputs[2].is_same(query);
  const Tensor attended = self ? packed_qkv_attention((*qkv_)(query), heads_, mask, p, causal_, {}, stream)
                               : attend_apart(inputs, mask, p, stream);
  return (*out_)(attended);
}

Tensor MultiHeadAttention::attend_apart(const std::vector<Tensor>& inputs, const Tensor& mask,
                                        float dropout, std::uint64_t stream) {
  const Tensor q = qkv_->forward_rows(inputs[0], 0, d_model_);
  const Tensor k = qkv_->forward_rows(inputs[1], d_model_, d_model_);
  const Tensor v = qkv_->forward_rows(inputs[2], 2 * d_model_, d_model_);
  const Tensor attended = scaled_dot_product_attention(split_heads(q), split_heads(k), split_heads(v),
                                                       mask, dropout, causal_, {}, stream);
  const std::int64_t b = q.size(0), t = q.size(1);
  return attended.permute({0, 2, 1, 3}).contiguous().reshape({b, t, d_model_});
}

std::string fused_qkv_layer(const std::string& old_layer_path) {
  for (const char* old : {"q_proj", "k_proj", "v_proj"}) {
    const std::string name(old);
    if (old_layer_path == name) return "qkv_proj";
    if (old_layer_path.ends_with("." + name)) {
      return old_layer_path.substr(0, old_layer_path.size() - name.size()) + "qkv_proj";
    }
  }
  return "";
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
  return h + (*drop_mlp_)(mlp(normed));
}

Tensor TransformerBlock::mlp(const Tensor& x) {
  // One op (the GELU and its gradient in the GEMMs' epilogues, the same numbers) when the three
  // modules would each run exactly their own op: no forward observer, compute-dtype override or
  // anomaly mode to hide the calls from, and no fp8 recipe on either Linear (its GEMMs quantise
  // their operands; nothing to fuse into).
  if (fc_->runs_plainly() && act_->runs_plainly() && proj_->runs_plainly() &&
      act_->approximate() == GeluApproximation::tanh && active_fp8_state(*fc_) == nullptr &&
      active_fp8_state(*proj_) == nullptr) {
    return gelu_mlp(x, fc_->weight(), fc_->bias(), proj_->weight(), proj_->bias());
  }
  return (*proj_)((*act_)((*fc_)(x)));
}

}  // namespace mixprec::nn
