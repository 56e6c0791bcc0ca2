#include "mixprec/nn/gpt.h"

#include "mixprec/core/error.h"
#include "mixprec/nn/checkpoint.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"

namespace mixprec::nn {

GPT::GPT(const GptConfig& c) : config_(c) {
  MIXPREC_CHECK(c.vocab_size >= 1 && c.context >= 1 && c.n_layers >= 1, ValueError, "GPT",
                "vocab_size, context and n_layers must be >= 1, got " << c.vocab_size << ", "
                                                                     << c.context << ", " << c.n_layers);
  tokens_ = register_module("tokens", std::make_shared<Embedding>(c.vocab_size, c.d_model, c.seed * 16 + 1));
  positions_ = register_module("positions", std::make_shared<Embedding>(c.context, c.d_model, c.seed * 16 + 2));
  drop_ = register_module("drop", std::make_shared<Dropout>(c.dropout, c.seed * 16 + 3));
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    std::shared_ptr<Module> block = std::make_shared<TransformerBlock>(
        c.d_model, c.n_heads, true, c.dropout, c.seed * 16 + 4 + static_cast<std::uint64_t>(i));
    // The Checkpoint is transparent in paths: "blocks.0.ln1.weight" either way.
    if (c.checkpoint_activations) block = checkpoint(std::move(block));
    blocks_.push_back(register_module("blocks." + std::to_string(i), std::move(block)));
  }
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(c.d_model));
}

Tensor GPT::logits(const std::vector<std::int64_t>& ids, std::int64_t batch, std::int64_t t) {
  check_length(batch, t);
  return head(tokens_->lookup(ids, {batch, t}), t);
}

void GPT::check_length(std::int64_t batch, std::int64_t t) const {
  MIXPREC_CHECK(batch >= 1 && t >= 1 && t <= config_.context, ValueError, "GPT",
                "sequences must have 1 to " << config_.context << " tokens (the context), got "
                                            << t << " (batch " << batch << ")");
}

const Tensor& GPT::position_ids(std::int64_t t) {
  Tensor& ids = position_ids_[t];
  if (!ids.defined() || ids.device() != current_device()) {
    std::vector<float> pos(static_cast<std::size_t>(t));
    for (std::int64_t i = 0; i < t; ++i) pos[static_cast<std::size_t>(i)] = static_cast<float>(i);
    ids = Tensor::from_vector(pos, {t});  // whole numbers below 2^24: exact in f32
  }
  return ids;
}

Tensor GPT::head(const Tensor& token_embeddings, std::int64_t t) {
  Tensor h = token_embeddings + (*positions_)(position_ids(t));
  h = (*drop_)(h);
  for (const auto& block : blocks_) h = (*block)(h);
  // The head is the token table itself (weight tying): logits = h E^T.
  return linear((*ln_f_)(h), tokens_->weight());
}

Tensor GPT::forward(const Tensor& ids) {
  MIXPREC_CHECK(ids.defined() && ids.dim() == 2, ShapeError, "GPT",
                "takes token ids [B, T], got " << (ids.defined() ? to_string(ids.shape()) : "undefined"));
  check_length(ids.size(0), ids.size(1));
  // The ids stay on the device: the embedding converts them there (no host read per step).
  return head((*tokens_)(ids), ids.size(1));
}

}  // namespace mixprec::nn
