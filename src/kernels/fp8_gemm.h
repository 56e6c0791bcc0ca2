#pragma once
/// The fp8 GEMM of the training recipes (docs/fp8.md, "The fp8 GEMM"): two fp8 operands, each
/// with its quantisation scale in device memory, multiplied exactly and accumulated in f32, the
/// result rounded once to C's dtype. It is the GEMM an fp8 Tensor Core runs (cuBLASLt's with A
/// and B scale pointers) and, on a CPU, its exact emulation: so a recipe computes the same
/// products everywhere, and only the summation order of the GEMM differs between devices.
///
/// Both operands are row-major with the reduction dimension contiguous (A [m, k], B [n, k]:
/// C = A Bᵀ), the one layout fp8 Tensor Cores read ("TN" in cuBLAS's column-major terms); the
/// fp8 Linear gets the other products from transposed copies of its quantised operands.
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// One fp8 GEMM: C [m, n] (c_dtype: f32, bf16 or f16) = A [m, k] · B [n, k]ᵀ (+ bias [n]) with
/// A of a_dtype and B of b_dtype, each f8e4m3 or f8e5m2 but not both f8e5m2 (fp8 Tensor Cores
/// take no E5M2 x E5M2 product, and a recipe never multiplies two gradients).
struct Fp8GemmDesc {
  std::int64_t m = 0, n = 0, k = 0;
  DType a_dtype = DType::f8e4m3;
  DType b_dtype = DType::f8e4m3;
  DType c_dtype = DType::f32;
  /// GPU only: let the Tensor Cores keep their partial sums at reduced precision between
  /// promotions (cuBLASLt's FAST_ACCUM; Transformer Engine uses it in the forward GEMMs only).
  /// The CPU ignores it: its sums are f32 throughout.
  bool fast_accum = false;
  /// A bias of n values (bias_dtype: f32, bf16 or f16) added to the f32 sums before C's one
  /// rounding: the fp8 Linear's output in its own dtype, with no f32 product in between.
  bool has_bias = false;
  DType bias_dtype = DType::f32;
  /// Calls f(DType) for a_dtype, b_dtype, c_dtype and (with a bias) bias_dtype
  /// (kernels/dtype_visit.h).
  template <class F>
  void for_each_dtype(F&& f) const {
    f(a_dtype);
    f(b_dtype);
    f(c_dtype);
    if (has_bias) f(bias_dtype);
  }
};

namespace ref {
/// C[i][j] = round_c( sum_p (decode(A[i][p]) * ia) * (decode(B[j][p]) * ib) [+ bias[j]] ), where
/// ia = 1 / *a_scale and ib = 1 / *b_scale are rounded to f32 (exact for the power-of-two
/// scales the recipes use, so each operand stands for exactly the value it was quantised from),
/// products exact in f32 for such operands, accumulated in f32 (in p order in the reference),
/// and rounded once to c_dtype; with has_bias, bias[j] widened to f32 is added to the f32 sum
/// first (bias is ignored otherwise and may be null). a_scale and b_scale are device f32 (the
/// scales the operands were cast with, fp8_scaled_cast's), read on the device: no host read.
/// k = 0 writes zeros (the bias, with one).
/// NaN operands (E4M3's 0x7f, E5M2's NaNs) propagate as in any sum. Throws ShapeError
/// (negative sizes), DTypeError (operand or output dtypes outside the rule above) or
/// ValueError (a null pointer for a non-empty operand) before touching C.
void fp8_gemm(const Fp8GemmDesc& desc, const void* a, const float* a_scale, const void* b,
              const float* b_scale, const void* bias, void* c);
}  // namespace ref

/// The argument checks every backend runs first (ref::fp8_gemm's throws).
void validate_fp8_gemm(const Fp8GemmDesc& desc, const void* a, const float* a_scale,
                       const void* b, const float* b_scale, const void* bias, const void* c);

/// The fp8 GEMM kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_FP8_GEMM_KERNELS(X) X(fp8_gemm)
MIXPREC_FP8_GEMM_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
