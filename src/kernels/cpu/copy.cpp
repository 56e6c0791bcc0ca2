// The CPU strided copy. Every element is the reference's (ref::copy: through float, so a 16-bit
// NaN comes out quiet); only the order of visiting changes, so the bits cannot:
// - contiguous to contiguous: the bulk (Highway) conversions on all threads;
// - runs contiguous in both operands (a slice, a concatenation): the conversions per run;
// - a layout change (NCHW <-> channels-last, a transpose): tiles of the two dimensions whose
//   stride is 1 in one operand each, so reads and writes both stay within a few cache lines per
//   tile. The reference's odometer visits such a copy element by element in the output's order
//   and read a channels-last activation at a stride of C elements: 0.7 ms for the CNN's 0.8 MB
//   flatten, against about 0.03 ms for the bytes it moves;
// - a transpose of fp8 bytes into the same fp8 dtype: the same tiles moving the bytes as the
//   reference's same-dtype conversion does, eight by eight in 64-bit words (transpose_block.h);
// - anything else (no unit stride on one side: a strided slice; fp8 converted to another
//   dtype): the reference, which packs storage-only bytes.
#include "kernels/copy.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/transpose_block.h"

namespace mixprec::kernels {
namespace {

bool is_row_major(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

/// A copy's dimensions with extents of 1 dropped and neighbours merged where both operands
/// step through them as one (fewer and longer loops; the same elements in the same places).
struct CopyDims {
  std::vector<std::int64_t> shape, in, out;

  CopyDims(std::span<const std::int64_t> s, std::span<const std::int64_t> in_strides,
           std::span<const std::int64_t> out_strides) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == 1) continue;
      if (!shape.empty() && in.back() == in_strides[i] * s[i] && out.back() == out_strides[i] * s[i]) {
        shape.back() *= s[i];
        in.back() = in_strides[i];
        out.back() = out_strides[i];
        continue;
      }
      shape.push_back(s[i]);
      in.push_back(in_strides[i]);
      out.push_back(out_strides[i]);
    }
  }
  int rank() const { return static_cast<int>(shape.size()); }
  /// The dimension whose stride is 1 in `strides` (the last such), or -1.
  int unit(const std::vector<std::int64_t>& strides) const {
    for (int i = rank(); i-- > 0;) {
      if (strides[static_cast<std::size_t>(i)] == 1) return i;
    }
    return -1;
  }
};

/// Element offsets, in and out, of index `flat` over the dimensions of d other than skip_a and
/// skip_b (row-major over those).
void outer_offsets(const CopyDims& d, int skip_a, int skip_b, std::int64_t flat,
                   std::int64_t& in_off, std::int64_t& out_off) {
  in_off = out_off = 0;
  for (int i = d.rank(); i-- > 0;) {
    if (i == skip_a || i == skip_b) continue;
    const auto k = static_cast<std::size_t>(i);
    const std::int64_t idx = flat % d.shape[k];
    flat /= d.shape[k];
    in_off += idx * d.in[k];
    out_off += idx * d.out[k];
  }
}

std::int64_t outer_count(const CopyDims& d, int skip_a, int skip_b) {
  std::int64_t n = 1;
  for (int i = 0; i < d.rank(); ++i) {
    if (i != skip_a && i != skip_b) n *= d.shape[static_cast<std::size_t>(i)];
  }
  return n;
}

/// Runs contiguous in both operands along the last dimension. Between dtypes, the bulk
/// conversion per run (bit-exact to the reference's, and parallel itself when a run is long);
/// within one dtype, the reference's element through float, which quiets a 16-bit signalling
/// NaN as ref::copy does (a byte copy would keep it).
void copy_runs(const CopyDims& d, const StridedInput& in, const StridedOutput& out) {
  const int last = d.rank() - 1;
  const std::int64_t len = d.shape.back(), runs = outer_count(d, last, last);
  if (in.dtype != out.dtype) {
    for (std::int64_t r = 0; r < runs; ++r) {
      std::int64_t in_off = 0, out_off = 0;
      outer_offsets(d, last, last, r, in_off, out_off);
      cpu::convert(cpu::at(in.data, in.dtype, in_off), in.dtype,
                   cpu::at(out.data, out.dtype, out_off), out.dtype, static_cast<std::size_t>(len));
    }
    return;
  }
  dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(in.data);
    T* dst = static_cast<T*>(out.data);
    cpu::parallel_for(runs, runs * len >= cpu::kParallelMinWork && runs > 1, [&](std::int64_t r) {
      std::int64_t in_off = 0, out_off = 0;
      outer_offsets(d, last, last, r, in_off, out_off);
      for (std::int64_t j = 0; j < len; ++j) dst[out_off + j] = T(static_cast<float>(src[in_off + j]));
    });
  });
}

/// A layout change: a is the output's unit-stride dimension, b the input's. Tiles of kTile x
/// kTile elements of (a, b): each reads kTile short runs of the input and writes kTile of the
/// output, all inside L1. Tasks are (outer index, tile row of b): disjoint outputs.
/// block(src, src_stride, dst, dst_stride, na, nb) moves one tile (transpose_block.h's contract).
template <class In, class Out, class Block>
void copy_tiles(const CopyDims& d, int a, int b, const In* src, Out* dst, const Block& block) {
  constexpr std::int64_t kTile = cpu::kTransposeTile;
  const auto ka = static_cast<std::size_t>(a), kb = static_cast<std::size_t>(b);
  const std::int64_t na = d.shape[ka], nb = d.shape[kb];
  const std::int64_t in_a = d.in[ka], out_b = d.out[kb];
  const std::int64_t tiles_b = (nb + kTile - 1) / kTile;
  const std::int64_t tasks = outer_count(d, a, b) * tiles_b;
  cpu::parallel_for(tasks, tasks * na * kTile >= cpu::kParallelMinWork && tasks > 1,
                    [&](std::int64_t task) {
    std::int64_t in_off = 0, out_off = 0;
    outer_offsets(d, a, b, task / tiles_b, in_off, out_off);
    const std::int64_t b0 = (task % tiles_b) * kTile, b1 = std::min(nb, b0 + kTile);
    for (std::int64_t a0 = 0; a0 < na; a0 += kTile) {
      block(src + in_off + a0 * in_a + b0, in_a, dst + out_off + b0 * out_b + a0, out_b,
            std::min(kTile, na - a0), b1 - b0);
    }
  });
}

/// copy_tiles on arithmetic dtypes: the reference's element, through float.
void convert_tiles(const CopyDims& d, int a, int b, const StridedInput& in,
                   const StridedOutput& out) {
  dispatch(in.dtype, out.dtype, [&](auto in_tag, auto out_tag) {
    using In = decltype(in_tag);
    using Out = decltype(out_tag);
    copy_tiles(d, a, b, static_cast<const In*>(in.data), static_cast<Out*>(out.data),
               [](const In* s, std::int64_t ss, Out* o, std::int64_t os, std::int64_t na,
                  std::int64_t nb) {
                 cpu::transpose_block(s, ss, o, os, na, nb,
                                      [](const In& x, Out& y) { y = Out(static_cast<float>(x)); });
               });
  });
}

/// copy_tiles of a storage-only (fp8) dtype into itself: the bytes moved, as the reference's
/// same-dtype conversion moves them (a transposed copy of quantised operands is exact).
void byte_tiles(const CopyDims& d, int a, int b, const StridedInput& in, const StridedOutput& out) {
  copy_tiles(d, a, b, static_cast<const std::uint8_t*>(in.data), static_cast<std::uint8_t*>(out.data),
             &cpu::transpose_block_bytes);
}

}  // namespace

namespace cpu {
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  if (n == 0) return;
  if (is_row_major(shape, in.strides) && is_row_major(shape, out.strides)) {
    cpu::convert(in.data, in.dtype, out.data, out.dtype, static_cast<std::size_t>(n));
    return;
  }
  const CopyDims d(shape, in.strides, out.strides);
  const int a = d.unit(d.out), b = d.unit(d.in);
  const bool transposing = a >= 0 && b >= 0 && a != b;
  if (!is_storage_only(in.dtype) && !is_storage_only(out.dtype)) {
    if (a >= 0 && a == d.rank() - 1 && b == a) return copy_runs(d, in, out);
    if (transposing) return convert_tiles(d, a, b, in, out);
  } else if (in.dtype == out.dtype && size_of(in.dtype) == 1 && transposing) {
    return byte_tiles(d, a, b, in, out);
  }
  ref::copy(shape, in, out);
}
}  // namespace cpu

}  // namespace mixprec::kernels
