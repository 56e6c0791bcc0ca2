#pragma once
/// Embedding lookup (token and position embeddings): a differentiable row gather.
#include <cstdint>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// out[..., :] = weight[indices[...], :]: weight is the table [V, D] (f32, bf16 or f16),
/// indices hold index_shape's element count of row numbers in row-major order (std::int64_t, as
/// cross_entropy's targets: mixprec has no integer tensor dtype), and the output is
/// [*index_shape, D] in weight's dtype (autocast: pass-through, the output follows the table).
/// Backward: the gradient of the table, in weight's dtype, is the scatter-add of the output
/// gradient rows: accumulated in f32 (16-bit tables: rounded once to their dtype at the end),
/// repeated indices add up, in index order whatever the thread count. Row padding_idx (if >= 0;
/// negative means none) still gathers its values but gets no gradient.
/// Errors: ShapeError if weight is not 2-d or index_shape does not hold indices.size() elements;
/// ValueError naming the index and V for an index outside [0, V), or for padding_idx >= V;
/// DTypeError for an fp8 table.
Tensor embedding(const Tensor& weight, const std::vector<std::int64_t>& indices,
                 const Shape& index_shape, std::int64_t padding_idx = -1);
/// embedding() of indices carried by a tensor of whole numbers (f32, bf16 or f16; token ids as
/// the data loaders make them): the output is [*indices.shape(), D]. The ids become int64
/// indices where they live (kernels::indices_from_values), so nothing crosses to the host;
/// ValueError for a value that is not a whole number in [0, 2^24) or outside [0, V).
Tensor embedding_by_ids(const Tensor& weight, const Tensor& indices, std::int64_t padding_idx = -1);
/// embedding() of a 1-d list of indices: [indices.size(), D], no padding row.
Tensor embedding(const Tensor& weight, const std::vector<std::int64_t>& indices);

}  // namespace mixprec
