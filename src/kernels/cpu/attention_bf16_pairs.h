#pragma once
/// The attention tile products whose two operands are both bf16 values (scores q k^T and
/// dout v^T of a bf16 call) on the native bf16 dot product of AVX512_BF16 (vdpbf16ps): two
/// products per f32 lane per instruction, twice the f32 FMA rate. Both operands are exactly
/// their bf16 inputs, so every product is exact and the sums are f32, as in the f32 path; only
/// the order of the terms differs (pairs of k, the hardware's order within a pair) and, as the
/// instruction does, bf16 inputs below 2^-126 count as zero and f32 sums that small flush to
/// zero (scores that small change no softmax). Used by attention.cpp when available(); the
/// other four products (with p or ds, which are not bf16 values) stay on the f32 tile kernel.
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

}  // namespace mixprec::kernels::cpu::attn_bf16
