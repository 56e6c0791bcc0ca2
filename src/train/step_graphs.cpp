#include "train/step_graphs.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::train::detail {
namespace {

// The batch's inputs as a contiguous tensor on the device the step runs on.
Tensor device_inputs(const Tensor& inputs) {
  const Tensor on_device = inputs.device() == current_device() ? inputs : inputs.to(current_device());
  return on_device.contiguous();
}

}  // namespace

void StepGraphs::refuse(std::string why) {
  refusal_ = std::move(why);
  told_ = false;
}

Tensor StepGraphs::run(const data::Batch& batch, std::uint64_t key_extra,
                       const std::vector<Tensor>& params, const Hooks& hooks, bool* replayed) {
  *replayed = false;
  if (refusal_.empty() && !batch.values.empty()) {
    refuse("regression targets are uploaded inside the step (only class and token targets have "
           "static device copies so far)");
  }
  if (!refusal_.empty()) {
    if (!told_) {
      std::fprintf(stderr, "mixprec: --cuda-graphs on: the step runs without a graph: %s\n",
                   refusal_.c_str());
      told_ = true;
    }
    return hooks.forward_backward(batch);
  }
  Key key;
  key.shape = batch.inputs.shape();
  key.dtype = static_cast<int>(batch.inputs.dtype());
  key.targets = static_cast<std::int64_t>(batch.targets.size());
  key.extra = key_extra;
  ++clock_;
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    *replayed = true;
    return replay(it->second, batch, params);
  }
  int& seen = warmed_[key];
  if (seen == 0) {
    // First sight of this key: an eager step fills what the capture must find ready (weight
    // copies, plans, cached tensors such as a model's position ids: one upload each).
    ++seen;
    return hooks.forward_backward(batch);
  }
  if (seen == 1) {
    // The second, eager too, rehearses the capture: what would break it is known before
    // anything is captured.
    // In the form the capture will run it: the targets already on the device.
    data::Batch staged = batch;
    if (!batch.targets.empty() && !batch.device_targets.defined()) {
      staged.device_targets = upload_indices(batch.targets);
    }
    Tensor loss;
    {
      mixprec::detail::CaptureRehearsal rehearsal;
      loss = hooks.forward_backward(staged);
      if (!rehearsal.failure().empty()) refuse("the step cannot be captured: " + rehearsal.failure());
    }
    ++seen;
    return loss;
  }
  return capture(key, batch, params, hooks, replayed);
}

Tensor StepGraphs::capture(const Key& key, const data::Batch& batch,
                           const std::vector<Tensor>& params, const Hooks& hooks, bool* replayed) {
  for (const Tensor& p : params) {
    if (p.grad().defined()) {
      refuse("the parameters hold gradients before the micro-batch (the graph assigns them; "
             "gradient accumulation across calls is not graphed)");
      return run(batch, key.extra, params, hooks, replayed);
    }
  }
  if (graphs_.size() >= kMaxGraphs) {
    // The least recently replayed goes (its memory pool with it, once its tensors are gone).
    auto oldest = graphs_.begin();
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    graphs_.erase(oldest);
  }
  Graph g;
  // The static buffers: filled now, outside the capture, and before every replay.
  g.inputs = device_inputs(batch.inputs).clone();
  if (!batch.targets.empty()) g.targets = upload_indices(batch.targets);
  data::Batch fixed;
  fixed.inputs = g.inputs;
  fixed.targets = batch.targets;
  fixed.device_targets = g.targets;
  fixed.index = batch.index;
  try {
    mixprec::detail::GraphCapture capturing;
    g.loss = hooks.forward_backward(fixed);
    g.graph = capturing.finish();
  } catch (const std::exception& e) {
    hooks.undo_failed_capture();
    refuse(std::string("the capture failed (") + e.what() + ")");
    return run(batch, key.extra, params, hooks, replayed);
  }
  g.grads.reserve(params.size());
  for (const Tensor& p : params) {
    g.grads.push_back(p.grad());
    g.grad_scales.push_back(p.grad_scale());
  }
  // The capture ran nothing: this micro-batch's work is the first replay.
  g.graph->replay();
  g.last_used = clock_;
  ++captures_;
  *replayed = false;  // the step's own forward_backward ran (recorded), so its bookkeeping did
  Tensor loss = g.loss;
  graphs_.emplace(key, std::move(g));
  return loss;
}

Tensor StepGraphs::replay(Graph& g, const data::Batch& batch, const std::vector<Tensor>& params) {
  const Device device = current_device();
  const Tensor inputs = device_inputs(batch.inputs);
  device_copy(g.inputs.data_ptr(), inputs.data_ptr(), static_cast<std::size_t>(inputs.numel()) * size_of(inputs.dtype()),
              device);
  if (g.targets.defined()) {
    if (batch.device_targets.defined()) {
      device_copy(g.targets.storage->data(), batch.device_targets.storage->data(),
                  static_cast<std::size_t>(g.targets.count) * sizeof(std::int64_t), device);
    } else {
      upload_indices_into(g.targets, batch.targets);
    }
  }
  g.graph->replay();
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].set_grad(g.grads[i]);
    if (g.grads[i].defined()) params[i].set_grad_scale(g.grad_scales[i]);
  }
  g.last_used = clock_;
  ++replays_;
  return g.loss;
}

}  // namespace mixprec::train::detail
