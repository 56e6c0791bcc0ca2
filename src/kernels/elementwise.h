#pragma once
/// Elementwise kernels on raw buffers: unary and binary ops (with broadcasting) and their
/// backward helpers. Every function exists twice: kernels::ref:: (plain scalar loops, the spec)
/// and kernels:: (dispatches to the fastest implementation the CPU allows, else the reference).
/// Values are loaded to f32, computed in f32 and rounded once (RNE) to the output dtype.
///
/// Accuracy of the cpu backend against the reference (tests/kernels/test_elementwise.cpp; the
/// ulp bounds in test_elementwise_accuracy.cpp):
///  - Bit-identical on every SIMD target: neg, abs, sqrt, rsqrt (a true 1/sqrt), reciprocal,
///    square, relu, add, sub, mul, div, maximum, minimum (NaN propagation and +-0 ties exactly
///    as spec/nan_minmax.h), affine (alpha*x, then + beta: two roundings, no FMA, like the
///    reference), fill, every backward formula the op list marks grad = exact, and every f32<->bf16/f16
///    conversion. NaN/Inf/-0 results match the reference's; only which NaN survives when BOTH
///    operands of a binary op are NaN is left open (IEEE 754 does not fix it).
///  - Transcendental ops: max error in f32 ulps of the exact result (ulps of subnormal results
///    are 2^-149), measured against double precision over ~1M floats spread across the domain
///    (ElementwiseVecMath.AccuracyAgainstDoublePrecision re-measures every bound on every
///    target this CPU runs, and on the reference). "FMA targets" = AVX2, AVX3, NEON, SVE (the
///    same fused operations, hence the same bits per lane); SSE4 and the scalar fallback compute
///    a*b+c with two roundings.
///    The bounds are the simd and ref columns of the op list (mixprec/core/op_list.h); measured:
///      op       domain               bound  measured: FMA / SSE4,scalar / ref (glibc)
///      exp      [-110, 89]           1.5    0.96 / 0.94 / 0.50   (> 88.7228: +Inf; < -104: 0)
///      log      [1e-45, FLT_MAX]     1.5    0.78 / 0.78 / 0.67
///      tanh     all floats           3.0    2.66 / 2.54 / 2.04
///      sigmoid  [-88.7, FLT_MAX]     2.5    2.04 / 2.04 / 2.04   (below -88.72 all give 0,
///                                                                  abs error < 2^-127)
///      gelu     [-30, FLT_MAX]       5.0    4.35 / 4.30 / 4.01   (ref's worst: subnormal tail)
///      gelu_tanh [-10, FLT_MAX]      2.5    1.97 / 1.97 / 1.97   (below -10.07 e^-w overflows
///                                                                  and all give -0, abs
///                                                                  error < 2^-124)
///      silu     [-87.3, FLT_MAX]     3.5    3.01 / 3.01 / 3.01   (below -87.3 e^-|x| is
///                                                                  subnormal: abs error
///                                                                  < 2^-120)
///    (the reference is held to 1.0 / 1.0 / 2.5 / 2.5 / 4.5 / 2.5 / 3.5). gelu_tanh is measured
///    against x / (1 + e^-w) in double with w = x (c1 + c2 x^2) rounded to f32 as the kernels
///    compute it (three IEEE operations, no FMA: the same bits in every implementation); the
///    rounding of w itself moves the result by up to |w| (1 - sigmoid(w)) * 2 ulps (relative),
///    as the rounding of -x/sqrt2 does for gelu. Against the reference, an f32 result is
///    therefore within (simd + ref bound) * eps * |ref|; a bf16/f16 result within one ulp of
///    the dtype. gelu's backward, Phi(x) + x phi(x), cancels near x = -0.75: its error is
///    bounded relative to |dy| (Phi + |x| phi), not to the result. gelu_tanh's backward,
///    s (1 + x w' e s) with e = e^-w, s = 1 / (1 + e), w' = c1 + 3 c2 x^2, cancels likewise
///    (near x = -0.75): bounded relative to |dy| (s + |x w'| e s^2). It is 1 for x > 10 and 0 for
///    x < -10 (exactly 1 in f32 there; |true value| < 3e-36 below -10), which keeps e = Inf and
///    x^2 = Inf out of the formula.
#include <cstdint>
#include <span>

#include "mixprec/core/dtype.h"
#include "mixprec/core/op_list.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// The elementwise ops, one enumerator per row of mixprec/core/op_list.h (the math of each is
/// kernels::math::<op> in elementwise_math.h).
enum class UnaryOp : std::uint8_t {
#define MIXPREC_UNARY_ENUMERATOR(op, ...) op,
  MIXPREC_UNARY_OPS(MIXPREC_UNARY_ENUMERATOR)
#undef MIXPREC_UNARY_ENUMERATOR
};
enum class BinaryOp : std::uint8_t {
#define MIXPREC_BINARY_ENUMERATOR(op, ...) op,
  MIXPREC_BINARY_OPS(MIXPREC_BINARY_ENUMERATOR)
#undef MIXPREC_BINARY_ENUMERATOR
};

/// A unary op's row of the list, as values.
struct UnaryOpInfo {
  UnaryOp op;
  const char* name;
  bool grad_reads_x;    ///< the backward reads the forward input x (else the output y)
  bool grad_exact;      ///< the vector backward is bit-identical to the reference's
  double simd_ulps;     ///< accuracy bound of the vector forward (0: bit-identical)
  double ref_ulps;      ///< accuracy bound of the reference forward (0: exact IEEE ops)
  float lo, hi;         ///< a domain tests draw inputs from
};
inline constexpr UnaryOpInfo kUnaryOps[] = {
#define MIXPREC_UNARY_INFO(op, api, policy, reads, grad, simd, ref, lo, hi, why) \
  {UnaryOp::op, #op, #reads[0] == 'x', #grad[0] == 'e', simd, ref, lo, hi},
    MIXPREC_UNARY_OPS(MIXPREC_UNARY_INFO)
#undef MIXPREC_UNARY_INFO
};
inline constexpr BinaryOp kBinaryOps[] = {
#define MIXPREC_BINARY_VALUE(op, ...) BinaryOp::op,
    MIXPREC_BINARY_OPS(MIXPREC_BINARY_VALUE)
#undef MIXPREC_BINARY_VALUE
};
inline constexpr const char* kBinaryOpNames[] = {
#define MIXPREC_BINARY_NAME(op, ...) #op,
    MIXPREC_BINARY_OPS(MIXPREC_BINARY_NAME)
#undef MIXPREC_BINARY_NAME
};

constexpr const UnaryOpInfo& info(UnaryOp op) { return kUnaryOps[static_cast<int>(op)]; }
constexpr const char* name(UnaryOp op) { return info(op).name; }
constexpr const char* name(BinaryOp op) { return kBinaryOpNames[static_cast<int>(op)]; }
/// Whether the backward formula of op reads x (else y); the other operand may be null.
constexpr bool grad_reads_x(UnaryOp op) { return info(op).grad_reads_x; }

/// A read-only strided operand: data pointer, dtype and per-dimension strides in elements
/// (stride 0 on a broadcast dimension). Its shape is the shape passed to the kernel.
struct StridedInput {
  const void* data;
  DType dtype;
  std::span<const std::int64_t> strides;

  /// Calls f(dtype): the one dtype of the operand (kernels/dtype_visit.h).
  template <class F>
  void for_each_dtype(F&& f) const { f(dtype); }
};

namespace ref {
/// out[i] = op(in[i]) over `shape`; out is contiguous row-major with out_dtype; in is strided.
void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype);
/// out = op(a, b) over `shape` (the broadcast shape); a and b are strided views of that shape
/// (stride 0 where broadcast) and may have different dtypes; out is contiguous with out_dtype.
void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype);
/// out = alpha * in + beta (contiguous, n elements, same dtype layout rules as unary).
void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta);
/// dx = dy * d op(x)/dx for a unary op, given the forward input x and output y (contiguous, all
/// same length n; dtypes may differ; dx has dx_dtype). Uses whichever of x or y is cheaper.
void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n);
/// Fills n contiguous elements of dtype with value (rounded once to dtype).
void fill(void* out, DType dtype, std::int64_t n, float value);
}  // namespace ref

/// The elementwise kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_ELEMENTWISE_KERNELS(X) X(unary) X(binary) X(affine) X(unary_backward) X(fill)
MIXPREC_ELEMENTWISE_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
