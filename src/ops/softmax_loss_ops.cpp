// softmax, log_softmax, cross_entropy and mse_loss with autograd.
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/runtime/autocast.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::record;

class SoftmaxNode final : public runtime::Node {
 public:
  SoftmaxNode(Tensor y, bool log) : y_(std::move(y)), log_(log) {}
  const char* name() const override { return log_ ? "log_softmax" : "softmax"; }
  void release_saved() override { y_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.contiguous();
    const std::int64_t cols = y_.size(-1), rows = y_.numel() / std::max<std::int64_t>(cols, 1);
    Tensor dx = Tensor::empty(y_.shape(), y_.dtype());
    kernels::softmax_backward(y_.data_ptr(), y_.dtype(), dy.data_ptr(), dy.dtype(), rows, cols,
                              dx.data_ptr(), dx.dtype(), log_);
    return {dx};
  }

 private:
  Tensor y_;
  bool log_;
};

Tensor softmax_impl(const Tensor& x_arg, std::int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  runtime::detail::OpScope prof(log ? runtime::OpKind::log_softmax : runtime::OpKind::softmax);
  ops::detail::require_defined(op, x_arg, "x");
  const Tensor x =
      runtime::autocast_inputs(log ? runtime::OpKind::log_softmax : runtime::OpKind::softmax, {&x_arg})[0];
  MIXPREC_CHECK(x.dim() >= 1, ShapeError, op, "needs at least one dimension");
  MIXPREC_CHECK(ops::detail::wrap_dim(op, dim, x.dim()) == x.dim() - 1, ValueError, op,
                "only the last dimension is supported; transpose dimension " << dim
                                                                             << " to the end first");
  const Tensor c = x.contiguous();
  const std::int64_t cols = c.size(-1), rows = c.numel() / std::max<std::int64_t>(cols, 1);
  Tensor y = Tensor::empty(c.shape(), c.dtype());
  kernels::softmax(c.data_ptr(), c.dtype(), rows, cols, y.data_ptr(), y.dtype(), log);
  record<SoftmaxNode>(y, {&x}, y.detach(), log);
  prof.done(y, {&x});
  return y;
}

/// The f32 [rows] tensor of rows that grad_per_row divides by.
Tensor row_count(std::int64_t rows) { return Tensor::full({rows}, static_cast<float>(rows)); }

/// d(mean)/d(row) = dy / rows for every row (divisor: row_count(rows)), computed where dy lives
/// (no host read): the one formula of both nodes, so the fused forward's gradient is the
/// backward's bit for bit.
Tensor grad_per_row(const Tensor& dy, const Tensor& divisor) {
  return ops::detail::binary_raw(kernels::BinaryOp::div, dy, divisor, DType::f32);
}

class CrossEntropyNode final : public runtime::Node {
 public:
  CrossEntropyNode(Tensor logits, std::shared_ptr<Storage> targets, float smoothing)
      : logits_(std::move(logits)), targets_(std::move(targets)), smoothing_(smoothing) {}
  const char* name() const override { return "cross_entropy"; }
  void release_saved() override { logits_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const std::int64_t rows = logits_.size(0), cols = logits_.size(1);
    const Tensor per_row = grad_per_row(dy, row_count(rows));
    Tensor dx = Tensor::empty(logits_.shape(), logits_.dtype());
    kernels::cross_entropy_backward(logits_.data_ptr(), logits_.dtype(), rows, cols,
                                    static_cast<const std::int64_t*>(targets_->data()),
                                    smoothing_, per_row.data<float>(), dx.data_ptr(), dx.dtype());
    return {dx};
  }

 private:
  Tensor logits_;
  std::shared_ptr<Storage> targets_;  // int64 [rows] on the logits' device
  float smoothing_;
};

/// The fused cross-entropy's node: it holds the gradient the forward computed for the promised
/// dy (expected_), not the logits. dy with expected_'s bits (the promise kept, as in every
/// training step) costs a kernel that compares two device scalars and returns; any other dy
/// rescales the saved gradient in place, dx = dlogits * (dy / expected): correct, but rounded
/// twice (once to the dtype in the forward, once here), which only a caller who broke the
/// promise pays. The gradient is handed to the first backward and the node keeps no reference
/// to it: the engine may adopt it as a leaf's .grad and add into it, so a second backward
/// through a retained graph cannot reuse it and is refused (the plain overload recomputes).
class FusedCrossEntropyNode final : public runtime::Node {
 public:
  FusedCrossEntropyNode(Tensor dlogits, Tensor expected)
      : dlogits_(std::move(dlogits)), expected_(std::move(expected)) {}
  const char* name() const override { return "cross_entropy"; }
  void release_saved() override {
    dlogits_ = Tensor();
    expected_ = Tensor();
  }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    MIXPREC_CHECK(dlogits_.defined(), StateError, "cross_entropy",
                  "the fused cross-entropy (cross_entropy with expected_grad) gave its gradient "
                  "to the first backward through this graph; to backward through it again "
                  "(retain_graph), compute the loss with cross_entropy(logits, targets, "
                  "label_smoothing)");
    const Tensor dy = dy_in.contiguous();
    Tensor dx = std::move(dlogits_);
    kernels::rescale_unless_equal(dx.data_ptr(), dx.dtype(), dx.numel(), dy.data<float>(),
                                  expected_.data<float>());
    expected_ = Tensor();
    return {dx};
  }

 private:
  Tensor dlogits_;   // [rows, cols] in the logits' dtype, until the first backward takes it
  Tensor expected_;  // f32 scalar: the dy dlogits_ is the gradient for
};

/// The checks and the layout both cross_entropy overloads share: logits as [rows, cols]
/// (contiguous; the logits themselves when they already are) and the targets uploaded.
struct CrossEntropyArgs {
  Tensor c;
  std::int64_t rows, cols;
  std::shared_ptr<Storage> targets;
};

// The targets' storage: uploaded from the host vector, or the caller's device indices.
struct TargetsGiven {
  const std::vector<std::int64_t>* host = nullptr;
  const DeviceIndices* device = nullptr;
  std::int64_t count() const {
    return host != nullptr ? static_cast<std::int64_t>(host->size()) : device->count;
  }
  std::shared_ptr<Storage> storage() const {
    if (device != nullptr) return device->storage;
    return ops::detail::upload_indices(*host, "cross-entropy targets");
  }
};

CrossEntropyArgs cross_entropy_args(const Tensor& logits, const TargetsGiven& targets,
                                    float label_smoothing) {
  const char* op = "cross_entropy";
  ops::detail::require_defined(op, logits, "logits");
  // fp32 by policy, and the kernel computes in f32 from any dtype: it widens 16-bit logits
  // exactly as it loads them, so no f32 copy is made (autocast's cast would save one for the
  // backward: 1.6 GB for GPT-2-small's [8192, 50257] logits) and the gradient comes back in the
  // logits' dtype, rounded once from f32 as the cast's backward would round it.
  runtime::autocast_inputs(runtime::OpKind::cross_entropy, {});  // the record; casts nothing
  require_compute_dtype(op, logits.dtype());
  MIXPREC_CHECK(logits.dim() == 2, ShapeError, op,
                "logits must be [N, C], got " << to_string(logits.shape()));
  MIXPREC_CHECK(targets.count() == logits.size(0), ShapeError, op,
                targets.count() << " targets for " << logits.size(0) << " rows of logits");
  MIXPREC_CHECK(targets.device == nullptr ||
                    (targets.device->defined() && targets.device->storage->device() == logits.device() &&
                     targets.device->storage->bytes() >=
                         static_cast<std::size_t>(targets.count()) * sizeof(std::int64_t)),
                ValueError, op,
                "device targets must be " << targets.count() << " int64 indices on the logits' device ("
                                          << to_string(logits.device()) << ")");
  MIXPREC_CHECK(logits.size(0) > 0, ShapeError, op, "empty batch");
  MIXPREC_CHECK(label_smoothing >= 0.0f && label_smoothing < 1.0f, ValueError, op,
                "label_smoothing must be in [0, 1), got " << label_smoothing);
  Tensor c = logits.detach().contiguous();
  const std::int64_t rows = c.size(0), cols = c.size(1);
  return {std::move(c), rows, cols, targets.storage()};
}

/// The batch mean of the per-row losses, on the device (f32 accumulation, as every reduction).
Tensor mean_loss(const Tensor& per_row, std::int64_t rows) {
  Tensor loss = Tensor::empty({}, DType::f32);
  kernels::reduce(kernels::ReduceOp::mean, per_row.data_ptr(), DType::f32, 1, rows, 1,
                  loss.data_ptr(), DType::f32);
  return loss;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, std::int64_t dim) { return softmax_impl(x, dim, true); }

Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& targets,
                     float label_smoothing) {
  runtime::detail::OpScope prof(runtime::OpKind::cross_entropy);
  CrossEntropyArgs a = cross_entropy_args(logits, TargetsGiven{&targets, nullptr}, label_smoothing);
  Tensor per_row = Tensor::empty({a.rows}, DType::f32);
  kernels::cross_entropy(a.c.data_ptr(), a.c.dtype(), a.rows, a.cols,
                         static_cast<const std::int64_t*>(a.targets->data()), label_smoothing,
                         per_row.data<float>());
  Tensor loss = mean_loss(per_row, a.rows);
  record<CrossEntropyNode>(loss, {&logits}, a.c, std::move(a.targets), label_smoothing);
  prof.done(loss, {&logits}, static_cast<double>(logits.numel()));
  return loss;
}

namespace {

Tensor fused_cross_entropy(const Tensor& logits, const TargetsGiven& targets,
                           float label_smoothing, const Tensor& expected_grad) {
  const char* op = "cross_entropy";
  runtime::detail::OpScope prof(runtime::OpKind::cross_entropy);
  ops::detail::require_defined(op, expected_grad, "expected_grad");
  MIXPREC_CHECK(expected_grad.dtype() == DType::f32 && expected_grad.numel() == 1 &&
                    expected_grad.dim() == 0,
                ValueError, op,
                "expected_grad must be an f32 scalar (the gradient backward will bring the "
                "loss), got " << name(expected_grad.dtype()) << " "
                              << to_string(expected_grad.shape()));
  MIXPREC_CHECK(expected_grad.device() == logits.device(), ValueError, op,
                "expected_grad must live on the logits' device");
  CrossEntropyArgs a = cross_entropy_args(logits, targets, label_smoothing);
  const Tensor expected = expected_grad.detach().clone();  // the caller may reuse its tensor
  // The per-row gradients, then (the kernel reads each before it writes the loss over it) the
  // per-row losses: the forward holds no more than the plain op's backward does.
  Tensor per_row = grad_per_row(expected, row_count(a.rows));
  // A contiguous copy of strided logits is ours: the gradient overwrites it in place.
  const bool own_copy = a.c.impl().storage != logits.impl().storage;
  Tensor dlogits = own_copy ? a.c : Tensor::empty(a.c.shape(), a.c.dtype());
  kernels::cross_entropy_fused(a.c.data_ptr(), a.c.dtype(), a.rows, a.cols,
                               static_cast<const std::int64_t*>(a.targets->data()),
                               label_smoothing, per_row.data<float>(),
                               per_row.data<float>(), dlogits.data_ptr(), dlogits.dtype());
  Tensor loss = mean_loss(per_row, a.rows);
  record<FusedCrossEntropyNode>(loss, {&logits}, std::move(dlogits), expected);
  prof.done(loss, {&logits}, static_cast<double>(logits.numel()));
  return loss;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& targets,
                     float label_smoothing, const Tensor& expected_grad) {
  // Nothing to differentiate (evaluation, no_grad): the plain op, which computes no gradient.
  if (!runtime::needs_grad({&logits})) return cross_entropy(logits, targets, label_smoothing);
  return fused_cross_entropy(logits, TargetsGiven{&targets, nullptr}, label_smoothing, expected_grad);
}

Tensor cross_entropy(const Tensor& logits, const DeviceIndices& targets, float label_smoothing,
                     const Tensor& expected_grad) {
  MIXPREC_CHECK(runtime::needs_grad({&logits}), ValueError, "cross_entropy",
                "device targets are for a training step's loss (logits that need a gradient); "
                "evaluate with the overload taking the targets as a vector");
  return fused_cross_entropy(logits, TargetsGiven{nullptr, &targets}, label_smoothing, expected_grad);
}

Tensor mse_loss(const Tensor& prediction, const Tensor& target) {
  const char* op = "mse_loss";
  runtime::detail::OpScope prof(runtime::OpKind::mse_loss);
  ops::detail::require_defined(op, prediction, "prediction");
  ops::detail::require_defined(op, target, "target");
  require_compute_dtype(op, prediction.dtype());
  require_compute_dtype(op, target.dtype());
  MIXPREC_CHECK(prediction.shape() == target.shape(), ShapeError, op,
                "prediction " << to_string(prediction.shape()) << " and target "
                              << to_string(target.shape()) << " must have the same shape");
  // Losses are f32 ops: the difference and its square would lose the small errors in 16 bits.
  runtime::autocast_inputs(runtime::OpKind::mse_loss, {});  // documents the policy; casts happen below
  Tensor loss = mean(square(sub(cast(prediction, DType::f32), cast(target, DType::f32))));
  prof.done_composite(loss);  // sub, square and mean report the work
  return loss;
}

}  // namespace mixprec
