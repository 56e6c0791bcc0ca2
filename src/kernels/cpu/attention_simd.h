#pragma once
/// The Highway building blocks of the blocked attention kernel (attention_simd.cpp), each
/// dispatched to the best target max_isa() allows. The dispatcher (attention.cpp) widens each
/// block of q, k, v and dout once into f32 scratch (rows of `ld` floats, ld a multiple of 16;
/// or transposed, one operand row per column) and runs these on them; only widen / narrow /
/// typed_dot touch 16-bit storage (through convert-inl.h).
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu::attn_simd {

/// dst[r * ld + k] = row r of src as f32, for r < rows, k < width; row r (dtype t) starts
/// r * stride elements after src; the padding columns [width, ld) are set to 0.
void widen_rows(const void* src, DType t, std::int64_t rows, std::int64_t width,
                std::int64_t stride, float* dst, std::int64_t ld);
/// The same rows transposed: dst[k * ldt + r] = element k of row r (ldt >= rows), the padding
/// columns [rows, ldt) of each of the width rows set to 0.
void widen_rows_transposed(const void* src, DType t, std::int64_t rows, std::int64_t width,
                           std::int64_t stride, float* dst, std::int64_t ldt);
/// Row r of dst (dtype t, r * stride elements after dst) = src[r * ld ..][0..width) *
/// row_scale[r], each element rounded once.
void narrow_rows(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t width,
                 const float* row_scale, void* dst, DType t, std::int64_t stride);
/// sum a[i] * b[i] over n elements of dtype t, in f32 (D_i = dout_i . out_i).
float typed_dot(const void* a, const void* b, DType t, std::int64_t n);

/// The tile product C[m, n] (+)= A[m, kdim] B[kdim, n]: element (r, k) of A is
/// a[r * a_rs + k * a_ks] (so A may be the transpose of a stored tile), B is row-major with
/// rows of ldb floats, n a multiple of 16 (ldb, ldc >= n). Every element of C is one sum over k
/// in index order with an FMA per term, whatever the vector width; without accumulate it is
/// then multiplied by scale and stored, with accumulate added to C. With accumulate, a zero
/// element of A adds nothing even where B holds inf or NaN (a masked or dropped probability
/// never turns a non-finite value into NaN).
void tile_product(const float* a, std::int64_t a_rs, std::int64_t a_ks, std::int64_t m,
                  std::int64_t kdim, const float* b, std::int64_t ldb, std::int64_t n, float scale,
                  float* c, std::int64_t ldc, bool accumulate);

/// One block of the forward's online softmax over a transposed score tile s (keys as rows,
/// queries as columns; rows < keys, columns < n, n a multiple of 16): for every column q,
/// m' = max(m[q], max over keys of s), alpha[q] = e^(m[q] - m') (0 while m' is -inf), each
/// s = e^(s - m') in place (0 while m' is -inf), l[q] = l[q] alpha[q] + the column's new sum
/// (in key order), m[q] = m'.
void online_softmax_columns(float* s, std::int64_t keys, std::int64_t ld, std::int64_t n,
                            float* m, float* l, float* alpha);
/// x[r * ld + c] = e^(x[r * ld + c] - sub[r]) for r < rows, c < n (n a multiple of 16).
void exp_sub_rows(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n, const float* sub);
/// x[r * ld + c] = e^(x[r * ld + c] - sub[c]) for r < rows, c < n (n a multiple of 16).
void exp_sub_columns(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n,
                     const float* sub);
/// dp = p (dp - D) in place over rows < rows, columns < n (n a multiple of 16), D being di[r]
/// for row r when di_per_row, else di[c] for column c: the softmax backward ds.
void softmax_grad(const float* p, float* dp, std::int64_t rows, std::int64_t ld, std::int64_t n,
                  const float* di, bool di_per_row);
/// x[r * ld + c] = x[r * ld + c] rounded to dtype t (bf16 or f16, round-to-nearest-even, as
/// the storage conversion) and widened back, for r < rows, c < n (n a multiple of 16): the
/// r() of AttentionDesc::round_probs on a tile of P or dS.
void round_rows(float* x, std::int64_t rows, std::int64_t ld, std::int64_t n, DType t);
/// x[0..n) *= a.
void scale(float* x, std::int64_t n, float a);

}  // namespace mixprec::kernels::cpu::attn_simd
