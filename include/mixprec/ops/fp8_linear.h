#pragma once
/// The fp8 Linear of the training recipes (docs/fp8.md, "Recipes"): x and the weight quantised
/// to E4M3 with their own per-tensor scales by the saturating cast, the incoming gradient to
/// E5M2 (hybrid) with a third, and every GEMM run on fp8 operands: decoded exactly, divided by
/// their power-of-two scales (exact), multiplied with f32 accumulation. The scales, amaxes and
/// histories live in device memory and are updated there; nothing is read on the host.
#include "mixprec/runtime/fp8_recipe.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// The scaling state of one tensor role: device f32 tensors.
struct Fp8TensorState {
  Tensor history;  ///< [recipe.history_length()], newest first, zeros at the start
  Tensor scale;    ///< [1], the quantisation scale (x_fp8 = sat(x * scale)); 1 at the start
  Tensor amax;     ///< [1], the amax the last cast measured
  /// [3], written only by a cast run while Fp8LinearState::observe is set: the fraction of the
  /// elements whose |x * scale| exceeded the format's largest finite value before the
  /// saturating clip (Inf counts, NaN does not), the fraction of the nonzero elements the cast
  /// rounded to zero, and 1 (0 while never observed).
  Tensor observed;
};

/// The state of one fp8 Linear: its recipe, the state of its input, weight and gradient, and a
/// device flag set to 1 when a cast met a NaN or Inf amax (the caller skips the step and clears
/// it). Created on the current device.
struct Fp8LinearState {
  /// ValueError (recipe.validate()) for a bad recipe.
  explicit Fp8LinearState(const runtime::Fp8Recipe& recipe);
  runtime::Fp8Recipe recipe;
  Fp8TensorState input, weight, grad;
  Tensor found_inf;  ///< [1] f32
  /// When set, every cast of this layer also counts its saturated and flushed elements into its
  /// role's `observed`: a host pass with counted downloads, for inspect and the TensorBoard
  /// logging steps only. A backward follows the setting its forward ran with.
  bool observe = false;
};

/// y = x @ weight^T + bias with fp8 operands as the recipe says: x [..., in] and weight
/// [out, in] (f32, bf16 or f16) are quantised to recipe.forward_format() and the GEMM runs on
/// them; in backward, the gradient dy is quantised to recipe.grad_format() and dx = dy_q w_q,
/// dw = dy_q^T x_q run on fp8 operands, db = the sum of the unquantised dy (f32). Delayed
/// scaling casts with the scale of the previous steps and then pushes this step's amax; current
/// scaling measures the amax first. The result is f32, or the autocast dtype inside an autocast
/// region (what the fp8 GEMM writes on a GPU). Differentiable in x, weight and bias.
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  Fp8LinearState& state);

}  // namespace mixprec
