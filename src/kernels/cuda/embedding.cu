// The CUDA embedding kernels.
//  - Argument checks: the indices (and token values) live in device memory, so the reference's
//    per-index checks run as a kernel that finds the first failing position (integer atomicMin:
//    the same position whatever order threads run in) and a second that writes it and its value
//    into a deferred check's slot (core/deferred_checks.h): the error is raised at the host's
//    next synchronisation (the step's loss read) through the reference's own check function, so
//    the message is its own, and the call costs the step no synchronisation of its own (it did
//    six per GPT step: token ids, then both embeddings forward and backward), which also lets a
//    CUDA graph capture it (train/step_graphs.h). Meanwhile the kernels stay in bounds on a bad
//    index: the lookup writes zeros for it, the backward skips a row past the table, and a bad
//    token value becomes index -1.
//  - embedding: one thread per output element, a copy of the table element's bits.
//  - embedding_backward: the reference adds, for each table row, its tokens' gradient rows in
//    increasing token order, in f32 from +0, rounded once. Here the indices are sorted by row
//    with CUB's radix sort, which is stable (equal rows keep increasing token order), giving
//    each row a segment of token positions; then one thread per (row, column) walks its row's
//    segment in that order. The same additions in the same order, no atomics: the reference's
//    bits, deterministically.
//  - indices_from_values: one thread per value, after the check.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/embedding.h"
#include "kernels/spec/token_id.h"

namespace mixprec::kernels::cuda {
namespace {

constexpr unsigned long long kNoFailure = ~0ull;

/// *first = the smallest i < n for which ok(i) is false (left alone if there is none).
template <class Check>
__global__ void first_failure_kernel(Check ok, std::int64_t n, unsigned long long* first) {
  MIXPREC_GRID_STRIDE(i, n) {
    if (!ok(i)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

/// verdict = {first, the bits of values[first]} when a failure was found (left {-1, 0} else).
template <class T>
__global__ void failure_verdict_kernel(const unsigned long long* first, const T* values,
                                       std::int64_t* verdict) {
  if (threadIdx.x != 0 || blockIdx.x != 0 || *first == kNoFailure) return;
  const auto i = static_cast<std::int64_t>(*first);
  std::int64_t bits = 0;
  if constexpr (sizeof(T) == sizeof(std::int64_t)) {
    bits = static_cast<std::int64_t>(values[i]);
  } else {
    bits = static_cast<std::int64_t>(__float_as_int(static_cast<float>(values[i])));
  }
  verdict[1] = bits;
  verdict[0] = i;
}

/// Queues the check: the first position i < n whose ok(i) is false, with values[i], lands in a
/// deferred check's slot, raised at the next synchronisation by raise(position, bits).
template <class Check, class T, class Raise>
void defer_first_failure(const char* op, Check ok, std::int64_t n, const T* values, Raise raise) {
  if (n == 0) return;
  std::int64_t* verdict = mixprec::detail::cuda_defer_check([raise](const std::int64_t* v) {
    if (v[0] >= 0) raise(v[0], v[1]);
  });
  Scratch first(sizeof(unsigned long long));
  auto* p = first.as<unsigned long long>();
  check_cuda(cudaMemsetAsync(p, 0xff, sizeof(unsigned long long), stream()), op,
             "cudaMemsetAsync");  // kNoFailure
  first_failure_kernel<<<grid(n), kThreads, 0, stream()>>>(ok, n, p);
  check_launch(op);
  failure_verdict_kernel<T><<<1, 1, 0, stream()>>>(p, values, verdict);
  check_launch(op);
}

struct IndexInRange {
  const std::int64_t* indices;
  std::int64_t rows;
  __device__ bool operator()(std::int64_t i) const { return indices[i] >= 0 && indices[i] < rows; }
};

template <class T>
struct ValueIsTokenId {
  const T* values;
  __device__ bool operator()(std::int64_t i) const {
    return is_token_id(static_cast<float>(values[i]));
  }
};

/// ValueError from the reference's check_embedding_index for the first index outside [0, rows),
/// deferred to the next synchronisation.
void check_indices(const char* op, const std::int64_t* indices, std::int64_t n,
                   std::int64_t rows) {
  defer_first_failure(op, IndexInRange{indices, rows}, n, indices,
                      [op, rows](std::int64_t position, std::int64_t index) {
                        detail::check_embedding_index(op, index, position, rows);
                      });
}

/// W: an unsigned word of the element's size (a bit copy, whatever the dtype).
template <class W>
__global__ void embedding_kernel(const W* weight, std::int64_t rows, std::int64_t cols,
                                 const std::int64_t* indices, std::int64_t total, W* out) {
  MIXPREC_GRID_STRIDE(e, total) {
    const std::int64_t i = e / cols, c = e % cols;
    const std::int64_t r = indices[i];
    // A bad index (its check raises at the next synchronisation) reads nothing out of bounds.
    out[e] = r >= 0 && r < rows ? weight[r * cols + c] : W(0);
  }
}

__global__ void iota_kernel(std::int64_t* out, std::int64_t n) {
  MIXPREC_GRID_STRIDE(i, n) out[i] = i;
}

/// Row r's tokens are sorted positions [begin[r], end[r]) (begin and end zeroed beforehand, so
/// a row no index names has none).
__global__ void row_segments_kernel(const std::uint64_t* sorted_rows, std::int64_t n,
                                    std::int64_t rows, std::int64_t* begin, std::int64_t* end) {
  MIXPREC_GRID_STRIDE(k, n) {
    const std::uint64_t r = sorted_rows[k];
    // A bad index's row (its check raises at the next synchronisation) may be past the table.
    if (r >= static_cast<std::uint64_t>(rows)) continue;
    if (k == 0 || sorted_rows[k - 1] != r) begin[r] = k;
    if (k == n - 1 || sorted_rows[k + 1] != r) end[r] = k + 1;
  }
}

/// dweight[r, c] = the sum of dy[i, c] over row r's tokens i in increasing order, in f32 from
/// +0, rounded once; zero for the padding row.
template <class TG, class TO>
__global__ void embedding_backward_kernel(const TG* dy, std::int64_t cols,
                                          const std::int64_t* positions,
                                          const std::int64_t* begin, const std::int64_t* end,
                                          std::int64_t padding_idx, std::int64_t total,
                                          TO* dweight) {
  MIXPREC_GRID_STRIDE(e, total) {
    const std::int64_t r = e / cols, c = e % cols;
    float acc = 0.0f;
    if (r != padding_idx) {
      for (std::int64_t k = begin[r]; k < end[r]; ++k) {
        acc += static_cast<float>(dy[positions[k] * cols + c]);
      }
    }
    dweight[e] = TO(acc);
  }
}

/// out[i] = values[i] as an index (a token id, checked: exact).
template <class T>
__global__ void indices_from_values_kernel(const T* values, std::int64_t n, std::int64_t* out) {
  MIXPREC_GRID_STRIDE(i, n) {
    const float v = static_cast<float>(values[i]);
    // Not a token id (its check raises at the next synchronisation): -1, which the lookup
    // reads nothing for.
    out[i] = is_token_id(v) ? static_cast<std::int64_t>(v) : -1;
  }
}

/// The bits a row number below rows needs (at least 1, for the sort's bit range).
int row_bits(std::int64_t rows) {
  int bits = 1;
  while (bits < 63 && (std::int64_t{1} << bits) < rows) ++bits;
  return bits;
}

}  // namespace

void embedding(const void* weight, DType dtype, std::int64_t rows, std::int64_t cols,
               const std::int64_t* indices, std::int64_t n, void* out) {
  detail::check_embedding_sizes("embedding", rows, cols, indices, n, -1);
  check_indices("embedding", indices, n, rows);
  const std::int64_t total = n * cols;
  if (total == 0) return;
  with_word_of_size(size_of(dtype), [&](auto w) {
    using W = decltype(w);
    embedding_kernel<W><<<grid(total), kThreads, 0, stream()>>>(
        static_cast<const W*>(weight), rows, cols, indices, total, static_cast<W*>(out));
  });
  check_launch("embedding");
}

void embedding_backward(const void* dy, DType dy_dtype, const std::int64_t* indices,
                        std::int64_t n, std::int64_t rows, std::int64_t cols,
                        std::int64_t padding_idx, void* dweight, DType dweight_dtype) {
  constexpr const char* op = "embedding_backward";
  detail::check_embedding_sizes(op, rows, cols, indices, n, padding_idx);
  check_indices(op, indices, n, rows);
  dispatch(dy_dtype, dweight_dtype, [&](auto tg, auto to) {
    using TG = decltype(tg);
    using TO = decltype(to);
    const std::int64_t total = rows * cols;
    if (total == 0) return;
    const auto row_bytes = static_cast<std::size_t>(rows) * sizeof(std::int64_t);
    Scratch begin(row_bytes), end(row_bytes);
    check_cuda(cudaMemsetAsync(begin.as<void>(), 0, row_bytes, stream()), op, "cudaMemsetAsync");
    check_cuda(cudaMemsetAsync(end.as<void>(), 0, row_bytes, stream()), op, "cudaMemsetAsync");
    const auto token_bytes = static_cast<std::size_t>(n) * sizeof(std::int64_t);
    Scratch sorted_rows(token_bytes), positions_in(token_bytes), positions(token_bytes);
    if (n > 0) {
      iota_kernel<<<grid(n), kThreads, 0, stream()>>>(positions_in.as<std::int64_t>(), n);
      check_launch(op);
      // Every index is in [0, rows) (checked above, raised at the next synchronisation), so
      // its bits as uint64 are its value and only the low row_bits(rows) of them differ; a bad
      // one sorts somewhere and is kept in bounds by row_segments_kernel.
      const auto* keys = reinterpret_cast<const std::uint64_t*>(indices);
      const int end_bit = row_bits(rows);
      std::size_t temp_bytes = 0;
      check_cuda(cub::DeviceRadixSort::SortPairs(
                     nullptr, temp_bytes, keys, sorted_rows.as<std::uint64_t>(),
                     positions_in.as<std::int64_t>(), positions.as<std::int64_t>(), n, 0,
                     end_bit, stream()),
                 op, "cub::DeviceRadixSort::SortPairs");
      Scratch temp(std::max<std::size_t>(temp_bytes, 1));
      check_cuda(cub::DeviceRadixSort::SortPairs(
                     temp.as<void>(), temp_bytes, keys, sorted_rows.as<std::uint64_t>(),
                     positions_in.as<std::int64_t>(), positions.as<std::int64_t>(), n, 0,
                     end_bit, stream()),
                 op, "cub::DeviceRadixSort::SortPairs");
      row_segments_kernel<<<grid(n), kThreads, 0, stream()>>>(
          sorted_rows.as<std::uint64_t>(), n, rows, begin.as<std::int64_t>(), end.as<std::int64_t>());
      check_launch(op);
    }
    embedding_backward_kernel<TG, TO><<<grid(total), kThreads, 0, stream()>>>(
        static_cast<const TG*>(dy), cols, positions.as<std::int64_t>(), begin.as<std::int64_t>(),
        end.as<std::int64_t>(), padding_idx, total, static_cast<TO*>(dweight));
    check_launch(op);
  });
}

void indices_from_values(const void* values, DType dtype, std::int64_t n, std::int64_t* out) {
  constexpr const char* op = "indices_from_values";
  MIXPREC_CHECK(n >= 0, ShapeError, op, "negative count " << n);
  MIXPREC_CHECK(n == 0 || (values != nullptr && out != nullptr), ValueError, op,
                "null values or out");
  dispatch(dtype, [&](auto t) {
    using T = decltype(t);
    const T* v = static_cast<const T*>(values);
    defer_first_failure(op, ValueIsTokenId<T>{v}, n, v, [](std::int64_t position, std::int64_t bits) {
      detail::check_token_id(position, std::bit_cast<float>(static_cast<std::int32_t>(bits)));
    });
    if (n == 0) return;
    indices_from_values_kernel<T><<<grid(n), kThreads, 0, stream()>>>(v, n, out);
    check_launch(op);
  });
}

}  // namespace mixprec::kernels::cuda
