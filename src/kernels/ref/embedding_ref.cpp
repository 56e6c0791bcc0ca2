// Reference embedding kernels: a row copy per index, and a scatter-add into an f32 table in
// index order, rounded once at the end. The spec the cpu backend must match bit for bit.
#include <cstring>
#include <vector>

#include "kernels/embedding.h"
#include "kernels/spec/token_id.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

void detail::check_embedding_sizes(const char* op, std::int64_t rows, std::int64_t cols,
                                   const std::int64_t* indices, std::int64_t n,
                                   std::int64_t padding_idx) {
  MIXPREC_CHECK(rows >= 0 && cols >= 0 && n >= 0, ShapeError, op,
                "negative size: table [" << rows << ", " << cols << "], " << n << " indices");
  MIXPREC_CHECK(n == 0 || indices != nullptr, ValueError, op, "indices is null");
  MIXPREC_CHECK(padding_idx < rows, ValueError, op,
                "padding_idx " << padding_idx << " is out of range for a table of " << rows
                               << " rows (negative means none)");
}

void detail::check_embedding_index(const char* op, std::int64_t index, std::int64_t position,
                                   std::int64_t rows) {
  MIXPREC_CHECK(index >= 0 && index < rows, ValueError, op,
                "index " << index << " at position " << position << " is out of range [0, "
                         << rows << ") for a table of " << rows << " rows");
}

void detail::check_embedding_args(const char* op, std::int64_t rows, std::int64_t cols,
                                  const std::int64_t* indices, std::int64_t n,
                                  std::int64_t padding_idx) {
  check_embedding_sizes(op, rows, cols, indices, n, padding_idx);
  for (std::int64_t i = 0; i < n; ++i) check_embedding_index(op, indices[i], i, rows);
}

void detail::check_token_id(std::int64_t position, float value) {
  MIXPREC_CHECK(is_token_id(value), ValueError, "indices_from_values",
                "index " << position << " is " << value << ", not a whole number in [0, 2^24); "
                         << "pass token ids");
}

namespace ref {

void indices_from_values(const void* values, DType dtype, std::int64_t n, std::int64_t* out) {
  MIXPREC_CHECK(n >= 0, ShapeError, "indices_from_values", "negative count " << n);
  MIXPREC_CHECK(n == 0 || (values != nullptr && out != nullptr), ValueError, "indices_from_values",
                "null values or out");
  dispatch(dtype, [&](auto t) {
    const auto* v = static_cast<const decltype(t)*>(values);
    for (std::int64_t i = 0; i < n; ++i) {  // every value checked before anything is written
      detail::check_token_id(i, static_cast<float>(v[i]));
    }
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(static_cast<float>(v[i]));
  });
}

void embedding(const void* weight, DType dtype, std::int64_t rows, std::int64_t cols,
               const std::int64_t* indices, std::int64_t n, void* out) {
  detail::check_embedding_args("embedding", rows, cols, indices, n, -1);
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * size_of(dtype);
  const auto* src = static_cast<const unsigned char*>(weight);
  auto* dst = static_cast<unsigned char*>(out);
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<std::size_t>(i) * row_bytes,
                src + static_cast<std::size_t>(indices[i]) * row_bytes, row_bytes);
  }
}

void embedding_backward(const void* dy, DType dy_dtype, const std::int64_t* indices,
                        std::int64_t n, std::int64_t rows, std::int64_t cols,
                        std::int64_t padding_idx, void* dweight, DType dweight_dtype) {
  detail::check_embedding_args("embedding_backward", rows, cols, indices, n, padding_idx);
  std::vector<float> acc(static_cast<std::size_t>(rows * cols), 0.0f);
  dispatch(dy_dtype, [&](auto tg) {
    using TG = decltype(tg);
    const TG* g = static_cast<const TG*>(dy);
    for (std::int64_t i = 0; i < n; ++i) {
      if (indices[i] == padding_idx) continue;
      float* a = acc.data() + indices[i] * cols;
      const TG* gi = g + i * cols;
      for (std::int64_t c = 0; c < cols; ++c) a[c] += static_cast<float>(gi[c]);
    }
  });
  dispatch(dweight_dtype, [&](auto to) {
    using TO = decltype(to);
    TO* out = static_cast<TO*>(dweight);
    for (std::size_t k = 0; k < acc.size(); ++k) out[k] = TO(acc[k]);
  });
}

}  // namespace ref
}  // namespace mixprec::kernels
