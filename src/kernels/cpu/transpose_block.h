#pragma once
/// The cpu backend's one transpose mechanism: the strided copy's layout changes (cpu/copy.cpp)
/// and the fp8 cast-transpose (cpu/fp8_scale.cpp) move their tiles through it. A block is read
/// along its source's unit stride and written along its destination's, kept small enough (a
/// tile of kTransposeTile on a side, or a few) that every line it touches stays in L1 meanwhile.
/// Bytes (fp8) move eight by eight in 64-bit words, the rest element by element.
#include <bit>
#include <cstdint>
#include <cstring>

namespace mixprec::kernels::cpu {

/// The side of the square tiles a transpose moves at a time: 32 x 32 f32 are 4 KiB, so the
/// input's and the output's lines of one tile fit L1 together.
inline constexpr std::int64_t kTransposeTile = 32;

/// move(src[a * src_stride + b], dst[b * dst_stride + a]) for a < na, b < nb: a block whose
/// source is contiguous along b and whose destination is contiguous along a.
template <class In, class Out, class Move>
void transpose_block(const In* src, std::int64_t src_stride, Out* dst, std::int64_t dst_stride,
                     std::int64_t na, std::int64_t nb, const Move& move) {
  for (std::int64_t b = 0; b < nb; ++b) {
    const In* s = src + b;
    Out* o = dst + b * dst_stride;
    for (std::int64_t a = 0; a < na; ++a) move(s[a * src_stride], o[a]);
  }
}

// Row r's byte c sits at bits 8c of its word (little-endian loads), which the masks assume.
static_assert(std::endian::native == std::endian::little, "the 8 x 8 byte transpose assumes little-endian words");

/// Swaps the `bits`-wide fields of word hi selected by mask << bits with those of word lo
/// selected by mask: one exchange of two off-diagonal sub-blocks.
inline void swap_word_fields(std::uint64_t& hi, std::uint64_t& lo, int bits, std::uint64_t mask) {
  const std::uint64_t t = ((hi >> bits) ^ lo) & mask;
  lo ^= t;
  hi ^= t << bits;
}

/// dst[b * dst_stride + a] = src[a * src_stride + b] for an 8 x 8 block of bytes, as eight
/// 64-bit rows: the off-diagonal 4 x 4 blocks swapped, then the 2 x 2 blocks inside each, then
/// the single bytes (a transpose is the transpose of the blocks with each block transposed).
/// Three rounds of four exchanges instead of 64 byte loads and stores.
inline void transpose_8x8_bytes(const std::uint8_t* src, std::int64_t src_stride, std::uint8_t* dst,
                                std::int64_t dst_stride) {
  std::uint64_t w[8];
  for (int r = 0; r < 8; ++r) std::memcpy(&w[r], src + r * src_stride, 8);
  for (int r = 0; r < 4; ++r) swap_word_fields(w[r], w[r + 4], 32, 0x00000000FFFFFFFFull);
  for (int r : {0, 1, 4, 5}) swap_word_fields(w[r], w[r + 2], 16, 0x0000FFFF0000FFFFull);
  for (int r : {0, 2, 4, 6}) swap_word_fields(w[r], w[r + 1], 8, 0x00FF00FF00FF00FFull);
  for (int r = 0; r < 8; ++r) std::memcpy(dst + r * dst_stride, &w[r], 8);
}

/// transpose_block for bytes: 8 x 8 blocks as words, the edges (na or nb not a multiple of 8)
/// byte by byte. The same bytes in the same places as transpose_block's plain move.
inline void transpose_block_bytes(const std::uint8_t* src, std::int64_t src_stride,
                                  std::uint8_t* dst, std::int64_t dst_stride, std::int64_t na,
                                  std::int64_t nb) {
  const std::int64_t na8 = na / 8 * 8, nb8 = nb / 8 * 8;
  for (std::int64_t b = 0; b < nb8; b += 8) {
    for (std::int64_t a = 0; a < na8; a += 8) {
      transpose_8x8_bytes(src + a * src_stride + b, src_stride, dst + b * dst_stride + a,
                                  dst_stride);
    }
  }
  const auto move = [](std::uint8_t s, std::uint8_t& o) { o = s; };
  // the rows past the last full 8 (every column), then the columns past it (the full rows)
  transpose_block(src + na8 * src_stride, src_stride, dst + na8, dst_stride, na - na8, nb, move);
  transpose_block(src + nb8, src_stride, dst + nb8 * dst_stride, dst_stride, na8, nb - nb8, move);
}

}  // namespace mixprec::kernels::cpu
