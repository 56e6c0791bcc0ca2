#pragma once
/// The attention tile products whose two operands are both bf16 values (scores q k^T and
/// dout v^T of a bf16 call) on the native bf16 dot product of AVX512_BF16 (vdpbf16ps): two
/// products per f32 lane per instruction, twice the f32 FMA rate. Both operands are exactly
/// their bf16 inputs, so every product is exact and the sums are f32, as in the f32 path; only
/// the order of the terms differs (pairs of k, the hardware's order within a pair) and, as the
/// instruction does, bf16 inputs below 2^-126 count as zero and f32 sums that small flush to
/// zero (scores that small change no softmax). Used by attention.cpp when available().
///
/// Under the 16-bit spec (AttentionDesc::round_probs) p and ds are bf16 values too, held in f32
/// tiles; the other four products (p v, p^T dout, ds^T q, ds k) then run here as well
/// (pair_product), their f32 tiles packed into pair words as they are, with the same exactness:
/// the products exact, the sums f32, the order of terms by pairs.
#include <cstdint>

namespace mixprec::kernels::cpu::attn_bf16 {

/// Whether the pair products may run: an x86-64 build on a CPU with AVX512_BF16 (the real
/// CPU, whatever MIXPREC_CPU_PROFILE says) and MIXPREC_ISA / set_max_isa not below avx512_bf16.
bool available();

/// Bf16 rows packed for the right operand: dst[p * ldt + r] = the 32-bit word of row r's
/// elements 2p (low half) and 2p + 1 (high half), for p < (width + 1) / 2 (an odd width's last
/// word has a zero high half) and r < rows; row r starts r * stride elements after src. The
/// columns [rows, ldt) of every word row are set to 0.
void pack_pairs_transposed(const std::uint16_t* src, std::int64_t rows, std::int64_t width,
                           std::int64_t stride, std::uint32_t* dst, std::int64_t ldt);

/// C[r * ldc + j] = scale * sum over k < kdim of A[r][k] B[k][j] for r < m, j < n (n a multiple
/// of 16): row r of A is kdim bf16 elements at a + r * lda; B is packed by
/// pack_pairs_transposed with ldb words per word row. Requires available().
void scores(const std::uint16_t* a, std::int64_t lda, std::int64_t m, std::int64_t kdim,
            const std::uint32_t* b, std::int64_t ldb, std::int64_t n, float scale, float* c,
            std::int64_t ldc);

/// Bf16 rows interleaved two by two, the right operand of pair_product (pairs along the
/// rows, the reduction): dst[p * ldw + j] = row 2p's element j (low half) and row 2p + 1's
/// (high half; 0 when rows is odd and 2p + 1 = rows) for p < (rows + 1) / 2, j < width, and 0
/// for width <= j < n; row r starts r * stride elements after src. n is a multiple of 16, <= ldw.
void pack_row_pairs(const std::uint16_t* src, std::int64_t rows, std::int64_t width,
                    std::int64_t stride, std::uint32_t* dst, std::int64_t ldw, std::int64_t n);

/// The same interleaving for an f32 tile whose values are bf16 values (a rounded p or ds tile):
/// dst[p * ldw + c] = the bf16 bits of x[2p][c] (low) and x[2p + 1][c] (high; 0 past rows), for
/// c < cols (a multiple of 16), rows ldx floats apart. The bits are the f32 values' high
/// halves, exact for bf16 values. Requires available().
void pack_f32_row_pairs(const float* x, std::int64_t rows, std::int64_t ldx, std::int64_t cols,
                        std::uint32_t* dst, std::int64_t ldw);

/// Pairs along each row of such a tile: dst[r * ldw + p] = the bits of x[r][2p] (low) and
/// x[r][2p + 1] (high; 0 when cols is odd and 2p + 1 = cols), for r < rows, p < (cols + 1) / 2.
/// Requires available().
void pack_f32_pairs_in_rows(const float* x, std::int64_t rows, std::int64_t ldx,
                            std::int64_t cols, std::uint32_t* dst, std::int64_t ldw);

/// C[r * ldc + j] += sum over p < pairs of the pair product of A's word (r, p) and B's word
/// (p, j), for r < m and j < n (a multiple of 16): A's word (r, p) is a[r * a_row + p * a_pair]
/// (either packing above, as its layout lies); B is packed by pack_row_pairs, ldb words a word
/// row. Each C element starts from its value and adds the pairs in order. Requires available().
void pair_product(const std::uint32_t* a, std::int64_t a_row, std::int64_t a_pair, std::int64_t m,
                  std::int64_t pairs, const std::uint32_t* b, std::int64_t ldb, std::int64_t n,
                  float* c, std::int64_t ldc);

}  // namespace mixprec::kernels::cpu::attn_bf16
