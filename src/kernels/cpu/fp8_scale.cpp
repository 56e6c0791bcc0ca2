// cpu fp8 recipe kernels. The scaled cast splits the array in fixed chunks over the threads; each
// chunk runs on Highway lanes (fp8_cast_simd.h: fp8_scale_math.h's element, bit for bit) and
// its amax, a max of bit patterns, is combined by an atomic max: exact and order-free, so
// threads change no bit. The cast-transpose runs over tiles of the matrix instead: each tile's
// row segments go through the same Highway cast into a stack tile, whose bytes, still in L1, are
// copied row by row into y and written transposed into yt by the copy's byte transpose
// (transpose_block.h). The input is read once and the bytes are never read back from memory,
// as the unfused cast then copy-transpose read them. (Transposing from y itself instead was
// twice as slow when y's rows are 2 KiB apart: a tile's 64 rows then share two L1 sets.)
// The scale update is not here: it touches one small history, so the cpu table leaves it to the
// reference (the backend's logged fallback), which is the kernel a thread would only slow.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/fp8_cast_simd.h"
#include "kernels/cpu/transpose_block.h"
#include "kernels/fp8_scale.h"
#include "kernels/spec/fp8_scale_checks.h"

namespace mixprec::kernels::cpu {
namespace {

/// Elements per chunk: 64K f32 (256 KiB) keep a thread streaming; below it one thread runs.
constexpr std::int64_t kChunk = 65536;

/// A cast-transpose tile: two transpose tiles of rows, so each column's 64 bytes fill a cache
/// line of yt, by 128 columns (an f32 tile of 32 KiB read, an 8 KiB tile of bytes).
constexpr std::int64_t kTileRows = 2 * kTransposeTile;
constexpr std::int64_t kTileCols = 128;

/// Raises the shared amax bits to `local` (a max of integers: order-free, so threads change no bit).
void raise_max(std::atomic<std::uint32_t>& m, std::uint32_t local) {
  std::uint32_t seen = m.load(std::memory_order_relaxed);
  while (seen < local && !m.compare_exchange_weak(seen, local, std::memory_order_relaxed)) {
  }
}

}  // namespace

void fp8_scaled_cast(const void* x, DType x_dtype, void* y, DType format, std::int64_t n,
                     const float* scale, float* amax) {
  detail::check_fp8_scaled_cast(x_dtype, y, format, n, scale, amax);
  log_simd("fp8_scaled_cast", dtype_label(x_dtype, format));
  const bool e4m3 = format == DType::f8e4m3;
  auto* out = static_cast<std::uint8_t*>(y);
  const float s = out != nullptr ? *scale : 1.0f;
  std::atomic<std::uint32_t> m{0};
  parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    const std::uint32_t local =
        fp8_scaled_cast_span(at(x, x_dtype, begin), x_dtype, out != nullptr ? out + begin : nullptr,
                             static_cast<std::size_t>(len), s, e4m3);
    raise_max(m, local);
  });
  if (amax != nullptr) *amax = std::bit_cast<float>(m.load());
}

void fp8_scaled_cast_transpose(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                               void* y, void* yt, DType format, const float* scale, float* amax) {
  detail::check_fp8_scaled_cast_transpose(x_dtype, rows, cols, yt, format, scale);
  if (verbose_enabled()) {
    // A fused kernel says which unfused path it stands for.
    verbose_log("fp8_scaled_cast_transpose", dtype_label(x_dtype, format),
                std::string(simd_target()) + " (fused: fp8_scaled_cast then a transposing copy)",
                simd_cap_reason());
  }
  const bool e4m3 = format == DType::f8e4m3;
  auto* out = static_cast<std::uint8_t*>(y);
  auto* out_t = static_cast<std::uint8_t*>(yt);
  const float s = *scale;
  const std::int64_t col_tiles = (cols + kTileCols - 1) / kTileCols;
  const std::int64_t tasks = (rows + kTileRows - 1) / kTileRows * col_tiles;
  std::atomic<std::uint32_t> m{0};
  // Tasks write disjoint tiles of y and yt, and each tile's bytes do not depend on the others.
  parallel_for(tasks, rows * cols >= kParallelMinWork, [&](std::int64_t task) {
    const std::int64_t r0 = task / col_tiles * kTileRows, c0 = task % col_tiles * kTileCols;
    const std::int64_t nr = std::min(kTileRows, rows - r0), nc = std::min(kTileCols, cols - c0);
    std::array<std::uint8_t, kTileRows * kTileCols> tile;
    std::uint32_t local = 0;
    for (std::int64_t r = 0; r < nr; ++r) {
      std::uint8_t* row = tile.data() + r * kTileCols;
      local = std::max(local, fp8_scaled_cast_span(at(x, x_dtype, (r0 + r) * cols + c0), x_dtype,
                                                   row, static_cast<std::size_t>(nc), s, e4m3));
      if (out != nullptr) std::memcpy(out + (r0 + r) * cols + c0, row, static_cast<std::size_t>(nc));
    }
    transpose_block_bytes(tile.data(), kTileCols, out_t + c0 * rows + r0, rows, nr, nc);
    raise_max(m, local);
  });
  if (amax != nullptr) *amax = std::bit_cast<float>(m.load());
}

}  // namespace mixprec::kernels::cpu
