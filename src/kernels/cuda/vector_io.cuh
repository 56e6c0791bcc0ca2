#pragma once
// The vector path of the memory-bound kernels, written once (the host's choice of path:
// vector_path.h). A kernel describes its per-element function once and map_elements walks its
// contiguous operands 8 elements per step with 16-byte loads and stores where the host chose
// ElementwisePath::packs, and one element per step otherwise and for the last n % 8 elements.
// Both steps widen, compute and round each element with the same functions (launch.cuh's
// load/store conversions, or the element types' own), so the two paths give the same bits.
// Included by .cu files only.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector_path.h"

namespace mixprec::kernels::cuda {

/// kPackElements consecutive elements of type T, aligned so that one copy is one vector access
/// (two for 32 bytes of f32, one 8-byte access for fp8).
template <class T>
struct alignas(sizeof(T) * kPackElements < kVectorBytes ? sizeof(T) * kPackElements
                                                         : kVectorBytes) Pack {
  T v[kPackElements];
};

/// A contiguous operand of dtype f32, bf16 or f16 read as f32 values (launch.cuh's load).
struct WidenedIn {
  const void* data;
  DType dtype;
};
/// A contiguous output of dtype f32, bf16 or f16 written from f32 values (launch.cuh's store).
struct RoundedOut {
  void* data;
  DType dtype;
};

// One element: a typed pointer's own element, or a dtype-tagged operand widened / rounded.
template <class T>
__device__ inline T load_one(const T* p, std::int64_t i) { return p[i]; }
__device__ inline float load_one(WidenedIn in, std::int64_t i) {
  return load(in.data, in.dtype, i);
}
template <class T>
__device__ inline void store_one(T* p, std::int64_t i, T v) { p[i] = v; }
__device__ inline void store_one(RoundedOut out, std::int64_t i, float v) {
  store(out.data, out.dtype, i, v);
}

// Elements i .. i + 7 (i a multiple of 8, the operand aligned): one pack.
template <class T>
__device__ inline Pack<T> load_pack(const T* p, std::int64_t i) {
  return *reinterpret_cast<const Pack<T>*>(p + i);
}
template <class T>
__device__ inline void store_pack(T* p, std::int64_t i, const Pack<T>& v) {
  *reinterpret_cast<Pack<T>*>(p + i) = v;
}

/// The pack of 16-bit words at element i widened by `widen` (bf16_bits_to_f32 or f16_bits_to_f32).
template <class Widen>
__device__ inline Pack<float> widen_pack(const void* p, std::int64_t i, Widen widen) {
  const Pack<std::uint16_t> bits = load_pack(static_cast<const std::uint16_t*>(p), i);
  Pack<float> r;
#pragma unroll
  for (int e = 0; e < kPackElements; ++e) r.v[e] = widen(bits.v[e]);
  return r;
}

/// The pack at element i of `in`, each element as load(in.data, in.dtype, i + e) reads it.
__device__ inline Pack<float> load_pack(WidenedIn in, std::int64_t i) {
  switch (in.dtype) {
    case DType::bf16:
      return widen_pack(in.data, i, [](std::uint16_t b) { return bf16_bits_to_f32(b); });
    case DType::f16:
      return widen_pack(in.data, i, [](std::uint16_t b) { return f16_bits_to_f32(b); });
    default: return load_pack(static_cast<const float*>(in.data), i);
  }
}

/// v rounded by `round` (f32_to_bf16_bits or f32_to_f16_bits) into the 16-bit words at element i.
template <class Round>
__device__ inline void round_pack(void* p, std::int64_t i, const Pack<float>& v, Round round) {
  Pack<std::uint16_t> bits;
#pragma unroll
  for (int e = 0; e < kPackElements; ++e) bits.v[e] = round(v.v[e]);
  store_pack(static_cast<std::uint16_t*>(p), i, bits);
}

/// v stored at element i of `out`, each element as store(out.data, out.dtype, i + e, v) writes it.
__device__ inline void store_pack(RoundedOut out, std::int64_t i, const Pack<float>& v) {
  switch (out.dtype) {
    case DType::bf16:
      return round_pack(out.data, i, v, [](float x) { return f32_to_bf16_bits(x); });
    case DType::f16:
      return round_pack(out.data, i, v, [](float x) { return f32_to_f16_bits(x); });
    default: return store_pack(static_cast<float*>(out.data), i, v);
  }
}

/// f applied element by element to packs of its operands.
template <class F, class... P>
__device__ inline auto map_pack(F f, const P&... in) {
  Pack<decltype(f(in.v[0]...))> r;
#pragma unroll
  for (int e = 0; e < kPackElements; ++e) r.v[e] = f(in.v[e]...);
  return r;
}

/// out[i] = f(in[i]...) for i < n over contiguous operands, each a typed pointer or a
/// WidenedIn (out a typed pointer or a RoundedOut): a grid-stride loop over packs where `path`
/// is ElementwisePath::packs (every operand 16-byte aligned), then over the elements left one
/// at a time (all of them on the other paths). With no operands f() is a fill.
template <class Out, class F, class... In>
__device__ inline void map_elements(std::int64_t n, ElementwisePath path, Out out, F f, In... in) {
  const std::int64_t packs = path == ElementwisePath::packs ? n / kPackElements : 0;
  MIXPREC_GRID_STRIDE(q, packs) {
    const std::int64_t i = q * kPackElements;
    store_pack(out, i, map_pack(f, load_pack(in, i)...));
  }
  const std::int64_t done = packs * kPackElements;
  MIXPREC_GRID_STRIDE(k, n - done) store_one(out, done + k, f(load_one(in, done + k)...));
}

/// Blocks for map_elements over n elements on `path`: a thread per pack on the vector path.
inline dim3 map_grid(std::int64_t n, ElementwisePath path) {
  return grid(path == ElementwisePath::packs ? (n + kPackElements - 1) / kPackElements : n);
}

}  // namespace mixprec::kernels::cuda
