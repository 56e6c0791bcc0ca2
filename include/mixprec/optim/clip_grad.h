#pragma once
/// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_) that refuses gradients
/// still multiplied by a GradScaler's loss scale: clipping those compares max_norm with S times
/// the real norm, the classic mixed-precision bug. Call scaler.unscale(optimizer) first.
#include <functional>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::optim {

/// Rescales the gradients of `params` in place so that their total norm is at most max_norm, and
/// returns the total norm before clipping (f32). Parameters without a gradient are ignored;
/// gradients may be f32, bf16 or f16 and of any layout.
///  - norm_type 2: each gradient's norm is accumulated in f32 (kernels::reduce norm2) into its
///    slot of one tensor, and the total is the f32 norm2 of those (PyTorch's vector_norm of the
///    stacked norms). norm_type infinity (std::numeric_limits<float>::infinity()): the largest
///    |g| of all (NaN wins).
///  - coef = min(max_norm / (total + 1e-6), 1) in f32 multiplies every gradient (one pass per
///    gradient, rounded once to the gradient's dtype; skipped when max_norm is infinite), as
///    PyTorch's clamp(max=1) does.
///  - Everything stays where the gradients live (clip_grad_norm_tensor); clip_grad_norm reads the
///    total with one download.
///  - A non-finite total (NaN/Inf gradients, e.g. a step the GradScaler will skip) leaves the
///    gradients untouched (PyTorch would multiply them by NaN or 0) and is returned as is, or
///    throws ValueError when error_if_nonfinite.
///  - combine (optional) is for gradients split across processes (a sharded optimizer, ZeRO):
///    it receives this process's partial total (the sum of squares for norm 2, the largest |g|
///    for infinity) and returns the whole job's, so every process clips by the global norm.
/// Throws StateError if any gradient has grad_scale() != 1 (not unscaled yet), ValueError if
/// max_norm is not > 0 (NaN included) or norm_type is neither 2 nor infinity.
///  - With combine, the per-tensor values are read (one download), combined across processes in
///    double (squares summed) and the coefficient computed in double, on the host.
float clip_grad_norm(const std::vector<Tensor>& params, float max_norm, float norm_type = 2.0f,
                     bool error_if_nonfinite = false,
                     const std::function<double(double)>& combine = {});

/// clip_grad_norm without a host read: the total comes back as a 0-d f32 tensor on the
/// gradients' device and the coefficient is applied there (a non-finite total leaves the
/// gradients untouched through a device-side select), so that the norm crosses to the host only
/// when a log needs it.
Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, float max_norm,
                             float norm_type = 2.0f);

/// clip_grad_norm_tensor's norm and coefficient without its scaling pass: `total` as that
/// function returns it, and `coef` = min(max_norm / (total + 1e-6), 1) in f32 (1 for a non-finite
/// total), both 0-d f32 tensors on the gradients' device; coef is undefined when max_norm is
/// infinite (nothing to clip). The gradients are not changed: pass coef to
/// Optimizer::step(coef), which multiplies each gradient element by it inside the update pass,
/// with the same bits as clip_grad_norm_tensor followed by step(), one read and one write of
/// every gradient fewer. What the training step uses.
struct ClipCoefficient {
  Tensor total;
  Tensor coef;
};
ClipCoefficient clip_grad_norm_coefficient(const std::vector<Tensor>& params, float max_norm,
                                           float norm_type = 2.0f);

/// Clamps every element of every defined gradient of `params` to [-clip_value, clip_value] in
/// place (a bound not representable in a 16-bit gradient's dtype is rounded to nearest even);
/// NaN stays NaN. Throws StateError if a gradient still carries a loss scale (grad_scale() != 1)
/// and ValueError unless clip_value > 0.
void clip_grad_value(const std::vector<Tensor>& params, float clip_value);

}  // namespace mixprec::optim
