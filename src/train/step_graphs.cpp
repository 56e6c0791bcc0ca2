#include "train/step_graphs.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "core/memory_pool.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::train::detail {
namespace {

// The batch's inputs as a contiguous tensor on the device the step runs on.
Tensor device_inputs(const Tensor& inputs) {
  const Tensor on_device = inputs.device() == current_device() ? inputs : inputs.to(current_device());
  return on_device.contiguous();
}

// The batch's targets in device memory of the graph's own: a device copy of the ones the data
// loader staged (no synchronisation), else one upload.
DeviceIndices own_targets(const data::Batch& batch) {
  if (!batch.device_targets.defined()) return upload_indices(batch.targets);
  DeviceIndices d;
  d.count = batch.device_targets.count;
  d.storage = std::make_shared<Storage>(static_cast<std::size_t>(d.count) * sizeof(std::int64_t),
                                        MemoryCategory::workspace);
  copy_indices_into(d, batch.device_targets);
  return d;
}

}  // namespace

void StepGraphs::refuse(std::string why) {
  refusal_ = std::move(why);
  told_ = false;
}

Tensor StepGraphs::run(const data::Batch& batch, std::uint64_t key_extra, int micro,
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
    if (micro == 0) step_first_ = nullptr;
    return hooks.forward_backward(batch);
  }
  Key key;
  key.shape = batch.inputs.shape();
  key.dtype = static_cast<int>(batch.inputs.dtype());
  key.targets = static_cast<std::int64_t>(batch.targets.size());
  key.extra = key_extra;
  ++clock_;
  if (micro == 0) {
    step_first_ = nullptr;
    step_key_ = key;
    if (auto it = graphs_.find(key); it != graphs_.end()) {
      *replayed = true;
      step_first_ = it->second.get();
      return replay(*it->second, batch, params);
    }
    std::unique_ptr<Graph> made;
    Tensor loss = advance(warmed_[key], batch, params, hooks, true, &made);
    if (made) {
      make_room();
      step_first_ = made.get();  // captured and replayed: the later micro-batches may follow
      graphs_.emplace(key, std::move(made));
    }
    return loss;
  }
  // A later micro-batch adds into the gradients of the first: graphed only when the first was
  // replayed from its graph (whose gradients the later graph adds into), at the same key.
  if (step_first_ == nullptr || !(key == step_key_)) return hooks.forward_backward(batch);
  Graph& first = *step_first_;
  if (first.later) {
    *replayed = true;
    return replay(*first.later, batch, params);
  }
  return advance(first.later_seen, batch, params, hooks, false, &first.later);
}

void StepGraphs::make_room() {
  if (graphs_.size() < kMaxGraphs) return;
  // The least recently replayed goes (its memory pool with it, once its tensors are gone).
  auto oldest = graphs_.begin();
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->second->last_used < oldest->second->last_used) oldest = it;
  }
  graphs_.erase(oldest);
}

Tensor StepGraphs::advance(int& seen, const data::Batch& batch, const std::vector<Tensor>& params,
                           const Hooks& hooks, bool first, std::unique_ptr<Graph>* made) {
  if (seen == 0) {
    // First sight: an eager step fills what the capture must find ready (weight copies, plans,
    // cached tensors such as a model's position ids: one upload each).
    ++seen;
    return hooks.forward_backward(batch);
  }
  if (seen == 1) {
    // The second, eager too, rehearses the capture: what would break it is known before
    // anything is captured. In the form the capture will run it: the targets on the device.
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
  if (first) {
    for (const Tensor& p : params) {
      if (p.grad().defined()) {
        refuse("the parameters hold gradients before the step's first micro-batch (its graph "
               "assigns them)");
        return hooks.forward_backward(batch);
      }
    }
  }
  *made = capture(batch, params, hooks, first);
  if (!*made) return hooks.forward_backward(batch);  // refused: said once, eager from now on
  Graph& g = **made;
  g.graph->replay();  // the capture ran nothing: this micro-batch's work is the first replay
  g.last_used = clock_;
  ++captures_;
  return g.loss;  // the step's own forward_backward ran (recorded): its bookkeeping is done
}

std::unique_ptr<StepGraphs::Graph> StepGraphs::capture(const data::Batch& batch,
                                                       const std::vector<Tensor>& params,
                                                       const Hooks& hooks, bool first) {
  auto g = std::make_unique<Graph>();
  // The static buffers: filled now, outside the capture, and before every replay.
  g->inputs = device_inputs(batch.inputs).clone();
  if (!batch.targets.empty()) g->targets = own_targets(batch);
  data::Batch fixed;
  fixed.inputs = g->inputs;
  fixed.targets = batch.targets;
  fixed.device_targets = g->targets;
  fixed.index = batch.index;
  // A later micro-batch's backward adds into the first one's gradients; a failed capture puts
  // them back as they were (its own writes never ran, but the engine may have replaced them).
  std::vector<Tensor> before;
  for (const Tensor& p : params) before.push_back(p.grad());
  try {
    if (!pool_) pool_ = std::make_shared<mixprec::detail::MemoryPool>(current_device());
    mixprec::detail::GraphCapture capturing(pool_);
    g->loss = hooks.forward_backward(fixed);
    g->graph = capturing.finish();
  } catch (const std::exception& e) {
    hooks.undo_failed_capture();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].set_grad(first ? Tensor() : before[i]);
    refuse(std::string("the capture failed (") + e.what() + ")");
    return nullptr;
  }
  g->grads.reserve(params.size());
  for (const Tensor& p : params) {
    g->grads.push_back(p.grad());
    g->grad_scales.push_back(p.grad_scale());
  }
  return g;
}

Tensor StepGraphs::replay(Graph& g, const data::Batch& batch, const std::vector<Tensor>& params) {
  const Device device = current_device();
  const Tensor inputs = device_inputs(batch.inputs);
  device_copy(g.inputs.data_ptr(), inputs.data_ptr(), static_cast<std::size_t>(inputs.numel()) * size_of(inputs.dtype()),
              device);
  if (g.targets.defined()) {
    if (batch.device_targets.defined()) {
      copy_indices_into(g.targets, batch.device_targets);
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
