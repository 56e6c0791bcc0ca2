#pragma once
/// Embedding lookup: a gather of table rows by index, and its backward, a scatter-add of
/// gradient rows into a gradient for the table. kernels::ref:: is the spec; kernels:: dispatches.
/// Indices are std::int64_t (as cross_entropy's targets: mixprec has no integer tensor dtype).
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// out[i, :] = weight[indices[i], :] for i < n: rows of `cols` elements of dtype, copied bit for
/// bit. weight is [rows, cols], out [n, cols], both contiguous. An index outside [0, rows)
/// throws ValueError naming it, its position and rows (before anything is written).
void embedding(const void* weight, DType dtype, std::int64_t rows, std::int64_t cols,
               const std::int64_t* indices, std::int64_t n, void* out);
/// dweight[r, :] = the sum, over i < n with indices[i] == r in increasing i, of dy[i, :],
/// accumulated in f32 from +0 and rounded once to dweight_dtype. Rows no index names, and row
/// padding_idx when padding_idx >= 0, are zero. dy is [n, cols] of dy_dtype, dweight
/// [rows, cols], both contiguous. The order of the additions is fixed, so the result does not
/// depend on threads: the cpu backend is bit-identical to the reference. Bad indices throw
/// ValueError as embedding() does; padding_idx >= rows throws ValueError.
void embedding_backward(const void* dy, DType dy_dtype, const std::int64_t* indices,
                        std::int64_t n, std::int64_t rows, std::int64_t cols,
                        std::int64_t padding_idx, void* dweight, DType dweight_dtype);

/// out[i] = values[i] as an index, for n values of a compute dtype (f32, bf16, f16): token ids
/// carried by a float tensor become the int64 indices the kernels above read, where they live.
/// A value that is not a whole number in [0, 2^24) throws ValueError naming its position
/// (before anything is written).
void indices_from_values(const void* values, DType dtype, std::int64_t n, std::int64_t* out);
}  // namespace ref

namespace detail {
/// The argument checks both backends share (ShapeError for negative sizes, ValueError for an
/// index outside [0, rows) or padding_idx >= rows); op names the kernel in the message.
/// check_embedding_sizes, then check_embedding_index for every index, in order.
void check_embedding_args(const char* op, std::int64_t rows, std::int64_t cols,
                          const std::int64_t* indices, std::int64_t n, std::int64_t padding_idx);
/// The checks of check_embedding_args that read no index (indices is only compared with null):
/// what a backend whose indices live in device memory checks on the host.
void check_embedding_sizes(const char* op, std::int64_t rows, std::int64_t cols,
                           const std::int64_t* indices, std::int64_t n, std::int64_t padding_idx);
/// ValueError naming index, its position and rows unless 0 <= index < rows.
void check_embedding_index(const char* op, std::int64_t index, std::int64_t position,
                           std::int64_t rows);
/// ValueError naming position and value unless value is a token id (is_token_id, token_id.h):
/// indices_from_values' check of one value.
void check_token_id(std::int64_t position, float value);
}  // namespace detail

/// The embedding kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_EMBEDDING_KERNELS(X) X(embedding) X(embedding_backward) X(indices_from_values)
MIXPREC_EMBEDDING_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
