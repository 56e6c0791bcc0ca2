// Dispatching masked_fill (the cpu backend): the layout plan, threads and the verbose log; the
// selection is the Highway row kernel of masked_fill_simd.cpp.
//
// x and out are contiguous, so only the mask's strides shape the plan: size-1 dimensions are
// dropped and neighbours merged where the mask is contiguous across them (a [T, T] causal mask
// broadcast over [B, H, T, T] becomes rows of T with a contiguous mask run). Each row's mask is
// a run (stride 1), one value (stride 0: fill or copy the whole row) or strided (gathered into
// a small block first). Work is split into fixed tasks of rows (or segments of one long row),
// and every element's result is a selection, so nothing depends on the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/masked_fill_simd.h"
#include "kernels/masked_fill.h"

namespace mixprec::kernels::cpu {
namespace {

constexpr std::int64_t kChunk = 16384;   // elements per parallel task
constexpr std::int64_t kGather = 1024;   // mask elements gathered at a time from a strided row

}  // namespace

void masked_fill(std::span<const std::int64_t> shape, const void* x, DType dtype,
                 const StridedInput& mask, float value, void* out) {
  const std::string label = dtype_label(mask.dtype, dtype);
  require_compute_dtype("masked_fill", dtype);  // fp8 calls run the reference
  require_compute_dtype("masked_fill", mask.dtype);
  const std::int64_t n = detail::masked_fill_count(shape, mask);
  std::vector<std::int64_t> dims, mstr;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && mstr.back() == mask.strides[d] * shape[d]) {
      dims.back() *= shape[d];
      mstr.back() = mask.strides[d];
    } else {
      dims.push_back(shape[d]);
      mstr.push_back(mask.strides[d]);
    }
  }
  log_simd("masked_fill", label);
  if (n == 0) return;
  const std::int64_t inner = dims.empty() ? 1 : dims.back();
  const std::int64_t s = dims.empty() ? 1 : mstr.back();
  const std::size_t outer_rank = dims.empty() ? 0 : dims.size() - 1;
  const std::int64_t rows = n / inner;
  const std::int64_t segs = inner > kChunk ? (inner + kChunk - 1) / kChunk : 1;
  const std::int64_t per = inner > kChunk ? 1 : std::max<std::int64_t>(1, kChunk / inner);
  const std::int64_t groups = (rows + per - 1) / per;
  std::uint32_t fill_bits = 0;  // the value rounded to dtype, for whole-row fills
  dispatch(dtype, [&](auto t) {
    const decltype(t) v(value);
    std::memcpy(&fill_bits, &v, sizeof(v));
  });
  const std::size_t es = size_of(dtype);
  parallel_for(groups * segs, n >= kParallelMinWork, [&](std::int64_t task) {
    const std::int64_t g = task / segs, seg = task % segs;
    const std::int64_t r0 = g * per, r1 = std::min(rows, r0 + per);
    const std::int64_t j0 = segs == 1 ? 0 : seg * kChunk;
    const std::int64_t j1 = segs == 1 ? inner : std::min(inner, j0 + kChunk);
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t off = 0, rem = r;  // the mask's offset at row r
      for (std::size_t d = outer_rank; d-- > 0;) {
        off += (rem % dims[d]) * mstr[d];
        rem /= dims[d];
      }
      const void* xr = at(x, dtype, r * inner + j0);
      void* orow = at(out, dtype, r * inner + j0);
      const void* mr = at(mask.data, mask.dtype, off + j0 * s);
      const std::int64_t len = j1 - j0;
      if (s == 1 || len == 1) {
        masked_fill_row(xr, dtype, mr, mask.dtype, value, orow, len);
      } else if (s == 0) {  // one mask value for the row: all fill or all copy
        if (load_f32(mr, mask.dtype, 0) != 0.0f) {
          auto* o = static_cast<unsigned char*>(orow);
          for (std::int64_t j = 0; j < len; ++j) std::memcpy(o + j * static_cast<std::int64_t>(es), &fill_bits, es);
        } else if (orow != xr) {
          std::memcpy(orow, xr, static_cast<std::size_t>(len) * es);
        }
      } else {
        alignas(64) unsigned char buf[kGather * 4];
        const std::size_t ms = size_of(mask.dtype);
        for (std::int64_t j = 0; j < len; j += kGather) {
          const std::int64_t m = std::min(kGather, len - j);
          const auto* src = static_cast<const unsigned char*>(at(mr, mask.dtype, j * s));
          for (std::int64_t k = 0; k < m; ++k) {
            std::memcpy(buf + static_cast<std::size_t>(k) * ms,
                        src + k * s * static_cast<std::int64_t>(ms), ms);
          }
          masked_fill_row(at(xr, dtype, j), dtype, buf, mask.dtype, value, at(orow, dtype, j), m);
        }
      }
    }
  });
}

namespace {

/// out[i] = c[i] != 0 ? a[i] : b[i] over elements of unsigned type U (the dtype's bits): a
/// branch-free loop GCC turns into vector blends on every target.
template <class U>
void select_bits(const float* c, const U* a, const U* b, U* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = c[i] != 0.0f ? a[i] : b[i];
}

}  // namespace

void where(std::int64_t n, const void* cond, DType cond_dtype, const void* a, const void* b,
           DType dtype, void* out) {
  const std::string label = dtype_label(cond_dtype, dtype);
  require_compute_dtype("where", cond_dtype);  // fp8 calls run the reference
  MIXPREC_CHECK(n >= 0, ShapeError, "where", "negative element count " << n);
  log_simd("where", label);
  // The condition is widened to f32 a block at a time by the vector conversion (NaN stays
  // nonzero), then the dtype's bits are selected; blocks are fixed, so threads change nothing.
  constexpr std::int64_t kBlock = 4096;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(blocks, n >= kParallelMinWork, [&](std::int64_t k) {
    alignas(64) float c[kBlock];
    const std::int64_t i0 = k * kBlock, m = std::min(kBlock, n - i0);
    convert(at(cond, cond_dtype, i0), cond_dtype, c, DType::f32, static_cast<std::size_t>(m));
    switch (size_of(dtype)) {
      case 4:
        select_bits(c, static_cast<const std::uint32_t*>(a) + i0,
                    static_cast<const std::uint32_t*>(b) + i0, static_cast<std::uint32_t*>(out) + i0, m);
        break;
      case 2:
        select_bits(c, static_cast<const std::uint16_t*>(a) + i0,
                    static_cast<const std::uint16_t*>(b) + i0, static_cast<std::uint16_t*>(out) + i0, m);
        break;
      default:
        select_bits(c, static_cast<const std::uint8_t*>(a) + i0,
                    static_cast<const std::uint8_t*>(b) + i0, static_cast<std::uint8_t*>(out) + i0, m);
        break;
    }
  });
}

}  // namespace mixprec::kernels::cpu
