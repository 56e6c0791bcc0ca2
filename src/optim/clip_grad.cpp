// Gradient clipping. Norms go through kernels::reduce (f32 accumulation, vectorised), into one
// tensor per call; the coefficient is computed and applied where the gradients live (a broadcast
// mul in place); value clipping through in-place maximum/minimum kernels. A
// strided gradient is gathered into a contiguous workspace copy and scattered back, so any
// layout works and contiguous ones cost no copy.
#include "mixprec/optim/clip_grad.h"

#include <cmath>
#include <limits>
#include <string>

#include "runtime/op_scope.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/masked_fill.h"
#include "kernels/reduce.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::optim {
namespace {

/// PyTorch's guard against dividing by a zero norm.
constexpr double kNormEps = 1e-6;

/// The defined gradients of params; StateError if one still carries a loss scale.
std::vector<Tensor> unscaled_grads(const char* op, const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    MIXPREC_CHECK(params[i].defined(), ValueError, op,
                  "parameter " << i << " is undefined; pass defined tensors");
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    const double scale = params[i].grad_scale();
    MIXPREC_CHECK(scale == 1.0, StateError, op,
                  "gradients are still multiplied by the loss scale ("
                      << scale << "); call scaler.unscale(optimizer) before clipping (parameter "
                      << i << ")");
    grads.push_back(std::move(g));
  }
  return grads;
}

/// A contiguous tensor with g's values: g itself when contiguous, else a workspace copy.
Tensor gather(const Tensor& g) {
  if (g.is_contiguous()) return g;
  Tensor c = Tensor::empty(g.shape(), g.dtype(), MemoryCategory::workspace);
  const Shape strides = contiguous_strides(g.shape());
  kernels::copy(g.shape(), {g.data_ptr(), g.dtype(), g.strides()},
                {c.data_ptr(), c.dtype(), strides});
  return c;
}

/// Writes the contiguous c (from gather) back into g when they are different buffers.
void scatter(const Tensor& c, const Tensor& g) {
  if (!c.is_same(g)) {
    const Shape strides = contiguous_strides(c.shape());
    kernels::copy(g.shape(), {c.data_ptr(), c.dtype(), strides},
                  {g.data_ptr(), g.dtype(), g.strides()});
  }
  g.bump_version();
}

/// Reduces every gradient to one f32 value (norm2 or amax over all its elements), each into its
/// slot of one f32 tensor on the gradients' device (0 for an empty gradient), in multi-tensor
/// calls (kernels::reduce_batch: 128 gradients a call; a batch covers consecutive slots, so an
/// empty gradient, which keeps its 0, ends one).
Tensor norms_of(kernels::ReduceOp op, const std::vector<Tensor>& grads) {
  Tensor out = Tensor::zeros({static_cast<std::int64_t>(grads.size())}, DType::f32,
                             MemoryCategory::workspace);
  kernels::ReduceBatch batch{};
  batch.op = op;
  std::vector<Tensor> in_batch;  // the (gathered) gradients of the batch, alive until it runs
  const auto flush = [&] {
    if (batch.size > 0) kernels::reduce_batch(batch);
    batch.size = 0;
    in_batch.clear();
  };
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].numel() == 0) {
      flush();
      continue;
    }
    const Tensor c = gather(grads[i]);
    if (batch.size == 0) batch.out = out.data<float>() + i;
    batch.runs[batch.size++] = {c.data_ptr(), c.dtype(), c.numel()};
    in_batch.push_back(c);
    if (batch.size == kernels::kReduceBatchRuns) flush();
  }
  flush();
  return out;
}

}  // namespace

namespace {

void check_clip_args(const char* op, float max_norm, float norm_type) {
  const bool inf_norm = std::isinf(norm_type) && norm_type > 0.0f;
  MIXPREC_CHECK(inf_norm || norm_type == 2.0f, ValueError, op,
                "norm_type must be 2 or infinity, got " << norm_type);
  MIXPREC_CHECK(max_norm > 0.0f, ValueError, op,
                "max_norm must be > 0, got " << max_norm << "; pass the largest total norm to allow");
}

/// Reports the norm's reads (and, when clipping, the scaling pass) to the profiler.
double work_of(const std::vector<Tensor>& grads, double* bytes) {
  double elements = 0;
  *bytes = 0;
  for (const Tensor& g : grads) {
    elements += static_cast<double>(g.numel());
    *bytes += static_cast<double>(g.nbytes());
  }
  return elements;
}

/// Multiplies every gradient in place by the 0-d f32 `coef` (broadcast), where it lives.
void scale_all(const std::vector<Tensor>& grads, const Tensor& coef) {
  const std::int64_t scalar[] = {0}, unit[] = {1};
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;
    const Tensor c = gather(g);
    const std::int64_t shape[] = {c.numel()};
    kernels::binary(kernels::BinaryOp::mul, shape, {c.data_ptr(), c.dtype(), unit},
                    {coef.data_ptr(), DType::f32, scalar}, c.data_ptr(), c.dtype());
    scatter(c, g);
  }
}

/// op(a, b) on two 0-d f32 tensors.
Tensor scalar_op(kernels::BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty({}, DType::f32, MemoryCategory::workspace);
  const std::int64_t shape[] = {1}, unit[] = {1};
  kernels::binary(op, shape, {a.data_ptr(), DType::f32, unit}, {b.data_ptr(), DType::f32, unit},
                  out.data_ptr(), DType::f32);
  return out;
}

}  // namespace

ClipCoefficient clip_grad_norm_coefficient(const std::vector<Tensor>& params, float max_norm,
                                           float norm_type) {
  constexpr const char* op = "clip_grad_norm";
  check_clip_args(op, max_norm, norm_type);
  const bool inf_norm = std::isinf(norm_type);
  const std::vector<Tensor> grads = unscaled_grads(op, params);
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::optimizer, op);
  if (prof.active()) {
    double bytes = 0;
    const double elements = work_of(grads, &bytes);
    runtime::detail::add_work(elements, bytes);
  }
  const kernels::ReduceOp reduce = inf_norm ? kernels::ReduceOp::amax : kernels::ReduceOp::norm2;
  ClipCoefficient out;
  out.total = Tensor::zeros({}, DType::f32, MemoryCategory::workspace);
  if (!grads.empty()) {
    const Tensor each = norms_of(reduce, grads);
    kernels::reduce(reduce, each.data_ptr(), DType::f32, 1, each.numel(), 1, out.total.data_ptr(),
                    DType::f32);
  }
  if (std::isinf(max_norm) || grads.empty()) {  // nothing to clip: coef would be 1
    prof.done_work(DType::f32);
    return out;
  }
  const Tensor& total = out.total;
  // coef = min(max_norm / (total + eps), 1), or 1 when the total is not finite (total - total
  // is 0 only for a finite total), all in f32 on the device.
  const Tensor coef_raw = scalar_op(
      kernels::BinaryOp::minimum,
      scalar_op(kernels::BinaryOp::div, Tensor::full({}, max_norm),
                scalar_op(kernels::BinaryOp::add, total, Tensor::full({}, static_cast<float>(kNormEps)))),
      Tensor::full({}, 1.0f));
  const Tensor finite = scalar_op(kernels::BinaryOp::eq,
                                  scalar_op(kernels::BinaryOp::sub, total, total),
                                  Tensor::zeros({}, DType::f32));
  out.coef = Tensor::empty({}, DType::f32, MemoryCategory::workspace);
  const Tensor one = Tensor::full({}, 1.0f);
  kernels::where(1, finite.data_ptr(), DType::f32, coef_raw.data_ptr(), one.data_ptr(),
                 DType::f32, out.coef.data_ptr());
  prof.done_work(DType::f32);
  return out;
}

Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, float max_norm, float norm_type) {
  const ClipCoefficient clip = clip_grad_norm_coefficient(params, max_norm, norm_type);
  if (!clip.coef.defined()) return clip.total;
  const std::vector<Tensor> grads = unscaled_grads("clip_grad_norm", params);
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::optimizer, "clip_grad_norm");
  scale_all(grads, clip.coef);
  if (prof.active()) {  // the scaling pass reads and writes every gradient
    double bytes = 0;
    const double elements = work_of(grads, &bytes);
    runtime::detail::add_work(elements, 2.0 * bytes);
  }
  prof.done_work(DType::f32);
  return clip.total;
}

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm, float norm_type,
                     bool error_if_nonfinite, const std::function<double(double)>& combine) {
  constexpr const char* op = "clip_grad_norm";
  check_clip_args(op, max_norm, norm_type);
  const bool inf_norm = std::isinf(norm_type);
  if (!combine) {
    const Tensor total = clip_grad_norm_tensor(params, max_norm, norm_type);
    const TransferReason why("gradient norm");
    const float total_f = total.item();
    MIXPREC_CHECK(std::isfinite(total_f) || !error_if_nonfinite, ValueError, op,
                  "the total norm of order " << norm_type << " of the gradients is " << total_f
                      << "; the gradients contain NaN or Inf (skip this step, or pass "
                         "error_if_nonfinite = false)");
    return total_f;
  }
  // Across processes: this process's per-tensor values cross to the host once, are combined in
  // double, and the job's total decides one coefficient.
  const std::vector<Tensor> grads = unscaled_grads(op, params);
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::optimizer, op);
  double bytes = 0;
  const double elements = prof.active() ? work_of(grads, &bytes) : 0.0;
  if (prof.active()) runtime::detail::add_work(elements, bytes);
  double total = 0.0;
  if (!grads.empty()) {
    const TransferReason why("gradient norm");
    const std::vector<float> each =
        norms_of(inf_norm ? kernels::ReduceOp::amax : kernels::ReduceOp::norm2, grads).to_vector();
    for (std::size_t i = 0; i < each.size(); ++i) {
      if (grads[i].numel() == 0) continue;
      const double v = each[i];
      if (inf_norm) {
        if (std::isnan(v) || v > total) total = v;  // NaN must win, like torch's max
        if (std::isnan(total)) break;
      } else {
        total += v * v;
      }
    }
  }
  total = combine(total);
  if (!inf_norm) total = std::sqrt(total);
  const float total_f = static_cast<float>(total);
  if (!std::isfinite(total_f)) {
    MIXPREC_CHECK(!error_if_nonfinite, ValueError, op,
                  "the total norm of order " << norm_type << " of the gradients is " << total_f
                      << "; the gradients contain NaN or Inf (skip this step, or pass "
                         "error_if_nonfinite = false)");
    prof.done_work(DType::f32);
    return total_f;
  }
  const double coef = double{max_norm} / (total + kNormEps);
  if (coef < 1.0) {
    scale_all(grads, Tensor::full({}, static_cast<float>(coef)));
    runtime::detail::add_work(elements, 2.0 * bytes);
  }
  prof.done_work(DType::f32);
  return total_f;
}

void clip_grad_value(const std::vector<Tensor>& params, float clip_value) {
  constexpr const char* op = "clip_grad_value";
  MIXPREC_CHECK(clip_value > 0.0f, ValueError, op,
                "clip_value must be > 0, got " << clip_value
                                               << "; gradients are clamped to [-clip_value, clip_value]");
  const std::vector<Tensor> grads = unscaled_grads(op, params);
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;
    const Tensor c = gather(g);
    // The bound rounded once to the gradient's dtype, so a clamped value is exactly it; the
    // clamp is two in-place binary kernels against broadcast scalars (maximum and minimum
    // propagate NaN, so a NaN gradient stays NaN, as it did).
    const float hi = dispatch(c.dtype(), [&](auto t) {
      return static_cast<float>(decltype(t)(clip_value));
    });
    const Tensor lo_t = Tensor::full({}, -hi), hi_t = Tensor::full({}, hi);
    const std::vector<std::int64_t> strides = c.strides(), scalar(c.shape().size(), 0);
    kernels::binary(kernels::BinaryOp::maximum, c.shape(), {c.data_ptr(), c.dtype(), strides},
                    {lo_t.data_ptr(), DType::f32, scalar}, c.data_ptr(), c.dtype());
    kernels::binary(kernels::BinaryOp::minimum, c.shape(), {c.data_ptr(), c.dtype(), strides},
                    {hi_t.data_ptr(), DType::f32, scalar}, c.data_ptr(), c.dtype());
    scatter(c, g);
  }
}

}  // namespace mixprec::optim
