#pragma once
/// The cpu backend's one transpose loop: the strided copy's layout changes (cpu/copy.cpp) and
/// the fp8 cast-transpose (cpu/fp8_scale.cpp) move their tiles through it. A block is read along
/// its source's unit stride and written along its destination's, kept small enough (a tile of
/// kTransposeTile on a side, or a few) that every line it touches stays in L1 meanwhile.
#include <cstdint>

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

}  // namespace mixprec::kernels::cpu
