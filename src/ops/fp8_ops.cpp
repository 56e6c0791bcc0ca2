// FP8 in computations: the emulated matmul/linear (decode to f32, f32 GEMM) and per-tensor
// power-of-two scaling.
#include "mixprec/ops/fp8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/transfer.h"
#include "mixprec/core/verbose.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "ops/fp8_matmul.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

/// DTypeError unless a and b are both fp8; names the operand that is not.
void require_both_fp8(const char* op, const Tensor& a, const char* a_name, const Tensor& b,
                      const char* b_name) {
  const bool fa = is_storage_only(a.dtype()), fb = is_storage_only(b.dtype());
  if (fa && fb) return;
  const Tensor& f = fa ? a : b;       // the fp8 one
  const Tensor& other = fa ? b : a;   // the one that is not
  MIXPREC_CHECK(false, DTypeError, op,
                (fa ? a_name : b_name)
                    << " is " << name(f.dtype()) << " but " << (fa ? b_name : a_name) << " is "
                    << name(other.dtype()) << "; an fp8 " << op
                    << " needs both operands in fp8 (quantize the other with fp8_quantize() or "
                       ".to(DType::"
                    << name(f.dtype()) << ")), or cast the fp8 operand to f32 first");
}

/// Exact fp8 -> f32 decode that stays in the autograd graph (straight-through gradient).
Tensor decode(const Tensor& t) { return t.to(DType::f32); }

void log_emulation(const char* op, const Tensor& a, const Tensor& b) {
  if (!verbose_enabled()) return;
  verbose_log(op, std::string(name(a.dtype())) + "x" + name(b.dtype()) + "->f32",
              "fp8 emulation (exact decode to f32, f32 GEMM with f32 accumulation)",
              "native fp8 GEMM: none on this backend");
}

void require_fp8_format(const char* op, DType format) {
  MIXPREC_CHECK(static_cast<std::size_t>(format) < kDTypeTable.size() && is_storage_only(format),
                DTypeError, op,
                "format must be DType::f8e4m3 or DType::f8e5m2, got "
                    << (static_cast<std::size_t>(format) < kDTypeTable.size()
                            ? std::string(name(format))
                            : "dtype code " + std::to_string(static_cast<int>(format))));
}

void require_scale(const char* op, float scale, const char* what) {
  MIXPREC_CHECK(std::isfinite(scale) && scale > 0.0f, ValueError, op,
                what << " must be positive and finite, got " << scale
                     << "; pass the scale fp8_quantize() returned");
}

/// The smallest k in [-126, 127] with amax / 2^k <= max (exact comparisons in double).
int pow2_exponent(double amax, double max) {
  if (amax == 0.0) return 0;
  int e = 0;
  std::frexp(amax / max, &e);  // amax / max in [2^(e-1), 2^e): k is e or next to it
  int k = e;
  while (std::ldexp(amax, -k) > max) ++k;
  while (std::ldexp(amax, -(k - 1)) <= max) --k;
  return std::min(127, std::max(-126, k));
}

}  // namespace

namespace ops::detail {

bool any_fp8(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t != nullptr && t->defined() && is_storage_only(t->dtype())) return true;
  }
  return false;
}

Tensor fp8_matmul(const Tensor& a, const Tensor& b) {
  require_both_fp8("matmul", a, "a", b, "b");
  log_emulation("matmul", a, b);
  // fp8 is not in the autocast table: the GEMM runs in f32 whatever region is active, so the
  // result is the exact-input, f32-accumulated product (not rounded to bf16 or f16).
  runtime::Autocast off(false, runtime::autocast_dtype());
  return matmul(decode(a), decode(b));
}

Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!is_storage_only(x.dtype()) && !is_storage_only(weight.dtype())) {
    require_compute_dtype("linear", bias.dtype());  // only the bias is fp8: refuse it
  }
  require_both_fp8("linear", x, "x", weight, "weight");
  log_emulation("linear", x, weight);
  runtime::Autocast off(false, runtime::autocast_dtype());
  return linear(decode(x), decode(weight), bias.defined() ? decode(bias) : Tensor());
}

}  // namespace ops::detail

Fp8Quantized fp8_quantize(const Tensor& x, DType format) {
  constexpr const char* op = "fp8_quantize";
  ops::detail::require_defined(op, x, "x");
  require_fp8_format(op, format);
  // Widen first (exact for every dtype): scaling by 2^-k is then exact, and the cast to fp8
  // is the only rounding.
  const Tensor wide = x.to(DType::f32);
  float amax = 0.0f;
  if (wide.numel() > 0) {
    runtime::NoGradGuard no_grad;
    // The scale is a host float in this API (Fp8Quantized::scale): one counted download.
    const TransferReason why("fp8 scale (amax)");
    amax = max_abs(wide).item();
  }
  MIXPREC_CHECK(std::isfinite(amax), ValueError, op,
                "x holds NaN or Inf (max |x| = " << amax << "); no scale brings them into "
                    << name(format) << "'s range: find where they come from first");
  const int k = pow2_exponent(amax, traits(format).max);
  const Tensor scaled = k == 0 ? wide : affine(wide, std::ldexp(1.0f, -k), 0.0f);
  return {scaled.to(format), std::ldexp(1.0f, k)};
}

Tensor fp8_scaled_matmul(const Tensor& a, float scale_a, const Tensor& b, float scale_b) {
  constexpr const char* op = "fp8_scaled_matmul";
  ops::detail::require_defined(op, a, "a");
  ops::detail::require_defined(op, b, "b");
  require_both_fp8(op, a, "a", b, "b");
  require_scale(op, scale_a, "scale_a");
  require_scale(op, scale_b, "scale_b");
  const Tensor y = ops::detail::fp8_matmul(a, b);
  const double s = static_cast<double>(scale_a) * static_cast<double>(scale_b);
  if (s == 1.0) return y;
  // One multiply when the product of the scales is a normal float; else one per scale (the
  // product of two power-of-two scales can leave float's range while the result does not).
  if (s >= static_cast<double>(FLT_MIN) && s <= static_cast<double>(FLT_MAX)) {
    return affine(y, static_cast<float>(s), 0.0f);
  }
  return affine(affine(y, scale_a, 0.0f), scale_b, 0.0f);
}

Tensor fp8_scaled_matmul(const Fp8Quantized& a, const Fp8Quantized& b) {
  return fp8_scaled_matmul(a.tensor, a.scale, b.tensor, b.scale);
}

}  // namespace mixprec
