#pragma once
/// GPT (GPT-2's architecture): token and learned position embeddings, n_layers pre-LN
/// TransformerBlocks with causal attention, a final LayerNorm, and the output head tied to the
/// token embedding (logits = h E^T, no bias).
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "mixprec/nn/embedding_layer.h"
#include "mixprec/nn/module.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/nn/transformer.h"

namespace mixprec::nn {

struct GptConfig {
  std::int64_t vocab_size = 256;  ///< e.g. bytes
  std::int64_t context = 128;     ///< longest sequence (rows of the position table)
  std::int64_t d_model = 128;
  std::int64_t n_heads = 4;
  std::int64_t n_layers = 4;
  float dropout = 0.0f;
  std::uint64_t seed = 0;
  /// Wraps each TransformerBlock in an nn::Checkpoint: training keeps only each block's input
  /// and recomputes the block in backward (about one more forward of compute for a fraction
  /// of the activation memory). Same parameter paths, gradients and outputs either way.
  bool checkpoint_activations = false;
};

class GPT : public Module {
 public:
  /// ValueError for sizes < 1, n_heads not dividing d_model, dropout outside [0, 1).
  explicit GPT(const GptConfig& config);
  /// Logits [B, T, vocab] for token ids [B, T] given row-major; ValueError if T > context or an
  /// id is outside [0, vocab).
  Tensor logits(const std::vector<std::int64_t>& ids, std::int64_t batch, std::int64_t t);
  /// The Module interface: ids as a [B, T] tensor of whole numbers (see Embedding::forward).
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "GPT"; }
  const GptConfig& config() const { return config_; }

 private:
  void check_length(std::int64_t batch, std::int64_t t) const;
  /// Positions, blocks, final norm and the tied head on token embeddings [B, T, D].
  Tensor head(const Tensor& token_embeddings, std::int64_t t);
  /// The positions 0..t-1 as f32 ids [t] on the current device: uploaded once per length and
  /// kept, so a step transfers nothing for them (and a captured graph, train/step_graphs.h,
  /// reads the same tensor at every replay).
  const Tensor& position_ids(std::int64_t t);

  GptConfig config_;
  std::map<std::int64_t, Tensor> position_ids_;
  std::shared_ptr<Embedding> tokens_, positions_;
  std::shared_ptr<Dropout> drop_;
  std::vector<std::shared_ptr<Module>> blocks_;  // TransformerBlocks, or Checkpoints of them
  std::shared_ptr<LayerNorm> ln_f_;
};

}  // namespace mixprec::nn
