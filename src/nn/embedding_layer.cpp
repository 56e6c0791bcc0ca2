#include "mixprec/nn/embedding_layer.h"

#include "kernels/elementwise.h"
#include "mixprec/core/error.h"
#include "mixprec/ops/embedding.h"

namespace mixprec::nn {

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t dim, std::uint64_t seed,
                     std::int64_t padding_idx)
    : padding_idx_(padding_idx) {
  MIXPREC_CHECK(num_embeddings >= 1 && dim >= 1, ValueError, "Embedding",
                "sizes must be >= 1, got " << num_embeddings << " x " << dim);
  MIXPREC_CHECK(padding_idx >= -1 && padding_idx < num_embeddings, ValueError, "Embedding",
                "padding_idx must be -1 (none) or a row in [0, " << num_embeddings << "), got "
                                                                 << padding_idx);
  // N(0, 0.02) as GPT-2 initialises its tables: randn's values scaled in f32 on the device (the
  // affine kernel rounds 0.02 * x once, as the host loop did), the padding row zeroed there.
  Tensor w = Tensor::randn({num_embeddings, dim}, seed, DType::f32, 0.0f, 1.0f);
  kernels::affine(w.data_ptr(), DType::f32, w.data_ptr(), DType::f32, w.numel(), 0.02f, 0.0f);
  if (padding_idx >= 0) {
    kernels::fill(w.data<float>() + padding_idx * dim, DType::f32, dim, 0.0f);
  }
  weight_ = register_parameter("weight", w);
}

Tensor Embedding::lookup(const std::vector<std::int64_t>& indices, const Shape& index_shape) {
  return embedding(weight_, indices, index_shape, padding_idx_);
}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding_by_ids(weight_, indices, padding_idx_);  // the ids stay where they are
}

}  // namespace mixprec::nn
