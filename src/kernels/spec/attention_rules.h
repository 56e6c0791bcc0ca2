#pragma once
// The per-element rules of attention that the reference and the blocked kernel must share
// exactly: the additive mask lookup, the causal cut and the dropout decision (kernels/attention.h).
// MIXPREC_HD: the CUDA kernels call these very functions on the device (the desc's pointers are
// device memory there, as the contract says; the RNG is constexpr).
#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/spec/host_device.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::detail {

/// The element where row i of batch-head bh of an operand with layout l starts (attention.h);
/// t and width are the operand's rows per batch-head and elements per row (its contiguous
/// layout when l is all zero).
MIXPREC_HD inline std::int64_t row_start(const AttentionDesc& d, const AttentionLayout& l,
                                         std::int64_t bh, std::int64_t i, std::int64_t t,
                                         std::int64_t width) {
  if (l.batch == 0 && l.head == 0 && l.row == 0) return (bh * t + i) * width;
  return bh / d.heads * l.batch + bh % d.heads * l.head + i * l.row;
}

/// Row starts of the four operand kinds.
MIXPREC_HD inline std::int64_t q_row(const AttentionDesc& d, std::int64_t bh, std::int64_t i) {
  return row_start(d, d.q_rows, bh, i, d.tq, d.d);
}
MIXPREC_HD inline std::int64_t k_row(const AttentionDesc& d, std::int64_t bh, std::int64_t j) {
  return row_start(d, d.k_rows, bh, j, d.tk, d.d);
}
MIXPREC_HD inline std::int64_t v_row(const AttentionDesc& d, std::int64_t bh, std::int64_t j) {
  return row_start(d, d.v_rows, bh, j, d.tk, d.dv);
}
MIXPREC_HD inline std::int64_t out_row(const AttentionDesc& d, std::int64_t bh, std::int64_t i) {
  return row_start(d, d.out_rows, bh, i, d.tq, d.dv);
}

/// What s = scale * (q_i . k_j) becomes once the causal cut and the mask apply.
MIXPREC_HD inline float masked_score(const AttentionDesc& d, std::int64_t b, std::int64_t i,
                                     std::int64_t j, float s) {
  if (d.causal && j > i) return -INFINITY;
  if (d.mask != nullptr) s += d.mask[d.mask_offsets[b] + i * d.mask_stride_q + j * d.mask_stride_k];
  return s;
}

/// The dropout factor of probability (b, i, j): 0 if dropped, 1/(1-p) if kept. The decision is
/// uniform(seed, index) >= p at index (b*tq + i)*tk + j, as the dropout op draws its mask.
MIXPREC_HD inline float dropout_factor(const AttentionDesc& d, std::int64_t b, std::int64_t i,
                                       std::int64_t j) {
  if (d.dropout_p == 0.0f) return 1.0f;
  const auto index = static_cast<std::uint64_t>((b * d.tq + i) * d.tk + j);
  return uniform(d.seed, index) >= d.dropout_p ? 1.0f / (1.0f - d.dropout_p) : 0.0f;
}

/// The same decision from 32 random bits already drawn for that index (random_bits(seed, index)).
MIXPREC_HD inline float dropout_factor_from_bits(float p, std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-24f >= p ? 1.0f / (1.0f - p) : 0.0f;
}

}  // namespace mixprec::kernels::detail
