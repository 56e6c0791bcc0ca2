#pragma once
/// The Highway building blocks of the blocked attention kernel (attention_simd.cpp), each
/// dispatched to the best target max_isa() allows. The dispatcher (attention.cpp) widens each
/// block of q, k, v and dout once into f32 scratch rows of `ld` floats (ld a multiple of 16,
/// the padding zero) and runs these on them; only widen / narrow / typed_dot touch 16-bit
/// storage (through convert-inl.h).
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu::attn_simd {

/// dst[0..n) = src[0..n) (dtype t) as f32.
void widen(const void* src, DType t, std::int64_t n, float* dst);
/// dst[0..n) (dtype t) = src[0..n) * s, rounded once.
void narrow_scaled(const float* src, std::int64_t n, float s, void* dst, DType t);
/// sum a[i] * b[i] over n elements of dtype t, in f32 (D_i = dout_i . out_i).
float typed_dot(const void* a, const void* b, DType t, std::int64_t n);
/// c[r * ldc + j] = scale * (a_r . b_j) for r < rows_a, j < rows_b; a_r = a + r * ld, b_j =
/// b + j * ld, dot products over ld floats, each summed in index order. ldc must be a multiple
/// of 16: columns from rows_b up to the next multiple of 16 may be overwritten (with zeros).
void scores(const float* a, std::int64_t rows_a, const float* b, std::int64_t rows_b,
            std::int64_t ld, float scale, float* c, std::int64_t ldc);
/// The largest of x[0..n) (-inf for n == 0).
float row_max(const float* x, std::int64_t n);
/// x[i] = exp(x[i] - sub) in place; returns the sum of the new x. exp(-inf) = 0.
float exp_sub(float* x, std::int64_t n, float sub);
/// x[i] = exp(x[i] - sub[i]) in place.
void exp_sub_each(float* x, std::int64_t n, const float* sub);
/// x[i] *= a.
void scale(float* x, std::int64_t n, float a);
/// acc[0..ld) += sum over c < count of coef[c] * rows[c * ld ..], c ascending; zero
/// coefficients (masked or dropped entries) are skipped.
void accumulate(const float* coef, std::int64_t count, const float* rows, std::int64_t ld,
                float* acc);
/// accumulate() for m rows at once: acc[r * ldacc ..] += sum over c < count of
/// coef[r * ldcoef + c] * rows[c * ld ..], each element's sum in c order (register-blocked when
/// rows are all finite; zero coefficients then add +-0, which changes no sum).
void accumulate_rows(const float* coef, std::int64_t m, std::int64_t count, std::int64_t ldcoef,
                     const float* rows, std::int64_t ld, float* acc, std::int64_t ldacc);

}  // namespace mixprec::kernels::cpu::attn_simd
