#pragma once
// What every CUDA kernel file of this folder shares: the stream kernels run on, the launch check,
// grid sizing, the grid-stride loop, loads and stores that widen to f32 and round once (RNE) with
// the host's own conversions (core/half.h, constexpr, so the bits are the reference's), strided
// layouts up to rank 8, and device scratch from the caching allocator. Included by .cu files only.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/cuda_runtime.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels::cuda {

/// The stream every cuda kernel and library call (cuBLASLt, cuDNN, CUB) runs on: the core's
/// backend stream (core/cuda_runtime.h, cuda_stream()), on which the core's transfers and the
/// profiler's events run too, so a download orders after every kernel. Every launch names it as
/// its 4th launch argument and no file but core/gpu.cpp makes a synchronous runtime call
/// (tests/kernels/test_stream_discipline.cpp fails otherwise): what capturing a step as a CUDA
/// graph needs.
inline cudaStream_t stream() { return static_cast<cudaStream_t>(mixprec::detail::cuda_stream()); }

/// Throws BackendError naming the kernel if its launch (or an earlier asynchronous error) failed.
inline void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  MIXPREC_CHECK(err == cudaSuccess, BackendError, kernel,
                "kernel launch failed: " << cudaGetErrorName(err) << " ("
                                         << cudaGetErrorString(err) << ")");
}

/// Throws BackendError naming the kernel and the runtime call if `err` is not cudaSuccess.
inline void check_cuda(cudaError_t err, const char* kernel, const char* call) {
  MIXPREC_CHECK(err == cudaSuccess, BackendError, kernel,
                call << " failed: " << cudaGetErrorName(err) << " (" << cudaGetErrorString(err)
                     << ")");
}

constexpr int kThreads = 256;  ///< threads per block of the grid-stride kernels

/// Blocks of kThreads threads, enough to cover n (capped; the loops stride over the rest).
inline dim3 grid(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535));
}

#define MIXPREC_GRID_STRIDE(i, n)                                                          \
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += std::int64_t{gridDim.x} * blockDim.x)

/// Element i of a buffer of dtype t (f32, bf16 or f16), widened to f32 exactly.
__device__ inline float load(const void* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::f16: return f16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

/// Stores v rounded once (RNE) to dtype t at element i.
__device__ inline void store(void* p, DType t, std::int64_t i, float v) {
  switch (t) {
    case DType::bf16: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16_bits(v); break;
    case DType::f16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16_bits(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

/// v rounded once (RNE) to dtype t and widened back: the value a store and a load would give.
/// The attention spec's rounding of P and dS (AttentionDesc::round_probs).
__device__ inline float round_to(DType t, float v) {
  switch (t) {
    case DType::bf16: return bf16_bits_to_f32(f32_to_bf16_bits(v));
    case DType::f16: return f16_bits_to_f32(f32_to_f16_bits(v));
    default: return v;
  }
}

/// A strided layout of up to two operands as a kernel argument (shapes and strides are host
/// values, passed by value).
constexpr int kMaxRank = 8;
struct Layout {
  int rank = 0;
  std::int64_t shape[kMaxRank] = {};
  std::int64_t stride[2][kMaxRank] = {};
};

/// The layout of shape with operand strides s0 and s1; ShapeError (naming op) above rank 8, for
/// a stride count that is not the rank, or a negative dimension.
inline Layout layout(const char* op, std::span<const std::int64_t> shape,
                     std::span<const std::int64_t> s0, std::span<const std::int64_t> s1) {
  MIXPREC_CHECK(shape.size() <= kMaxRank, ShapeError, op,
                "the cuda kernels take up to " << kMaxRank << " dimensions, got " << shape.size());
  MIXPREC_CHECK(s0.size() == shape.size() && s1.size() == shape.size(), ShapeError, op,
                "an operand has " << (s0.size() != shape.size() ? s0.size() : s1.size())
                                  << " strides for a rank-" << shape.size()
                                  << " shape; pass one stride per dimension");
  Layout l;
  l.rank = static_cast<int>(shape.size());
  for (int d = 0; d < l.rank; ++d) {
    MIXPREC_CHECK(shape[d] >= 0, ShapeError, op, "negative dimension " << shape[d] << " in shape");
    l.shape[d] = shape[d];
    l.stride[0][d] = s0[d];
    l.stride[1][d] = s1[d];
  }
  return l;
}

inline std::int64_t numel(const Layout& l) {
  std::int64_t n = 1;
  for (int d = 0; d < l.rank; ++d) n *= l.shape[d];
  return n;
}

/// Operand k's element offset for element i of the shape (row-major).
__device__ inline std::int64_t offset(const Layout& l, int k, std::int64_t i) {
  std::int64_t off = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const std::int64_t idx = i % l.shape[d];
    i /= l.shape[d];
    off += idx * l.stride[k][d];
  }
  return off;
}

/// Device scratch for one kernel call, from the caching allocator (no cudaMalloc in a steady
/// step loop), or a graph capture's pool while capturing (core/cuda_runtime.h); returned to it
/// when the call ends. The stream orders later users after this
/// call's kernels, so release needs no synchronisation. Out of device memory (after the cache
/// has returned its blocks) is a BackendError naming the kernel and the bytes, never a null
/// pointer handed to a kernel.
class Scratch {
 public:
  explicit Scratch(std::size_t bytes, const char* kernel = "cuda kernel")
      : bytes_(bytes), p_(bytes ? mixprec::detail::cuda_scratch_acquire(bytes, pool_) : nullptr) {
    MIXPREC_CHECK(bytes == 0 || p_ != nullptr, BackendError, kernel,
                  "out of device memory for " << bytes << " bytes of scratch");
  }
  ~Scratch() { mixprec::detail::cuda_scratch_release(p_, bytes_, pool_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  std::size_t bytes_;
  std::shared_ptr<void> pool_;  // a graph capture's pool it came from, or null (the cache)
  void* p_;
};

}  // namespace mixprec::kernels::cuda
