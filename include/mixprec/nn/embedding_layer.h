#pragma once
/// Embedding: a trainable table of vectors looked up by index (token and position embeddings).
#include <cstdint>
#include <vector>

#include "mixprec/nn/module.h"

namespace mixprec::nn {

/// Table [num_embeddings, dim], initialised N(0, 0.02^2) as GPT-2 does.
class Embedding : public Module {
 public:
  /// ValueError unless both sizes are >= 1 and padding_idx is -1 (none) or a row.
  Embedding(std::int64_t num_embeddings, std::int64_t dim, std::uint64_t seed = 0,
            std::int64_t padding_idx = -1);
  /// Rows of the table for indices holding numel(index_shape) row numbers: [*index_shape, dim].
  Tensor lookup(const std::vector<std::int64_t>& indices, const Shape& index_shape);
  /// The Module interface: indices as a tensor of whole numbers (any float dtype; exact below
  /// 2^24 in f32), e.g. a [B, T] batch of token ids. ValueError for a non-integral value.
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
  const Tensor& weight() const { return weight_; }

 private:
  std::int64_t padding_idx_;
  Tensor weight_;
};

}  // namespace mixprec::nn
