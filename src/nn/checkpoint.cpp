// Activation checkpointing: forward without a graph, backward by recomputing one. The recompute
// must draw the same dropout masks and cast to the same dtypes as the forward did, or the
// gradients would belong to a different function: hence the replayed counters and autocast state.
#include "mixprec/nn/checkpoint.h"

#include <cstdint>

#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"

namespace mixprec::nn {
namespace {

constexpr const char* kOp = "Checkpoint";

// Stands in, inside the recomputed graph, for the producer of one input of the child: the nested
// backward delivers that input's gradient here, summed over its uses in the child, as the engine
// would deliver it to the producer without checkpointing. It asks for the producer's gradient
// dtype, so the recomputed ops write the input gradient in the same dtype as the unwrapped
// graph would (e.g. f32 straight from a GEMM accumulator when the producer is a cast).
class InputGradCapture final : public runtime::Node {
 public:
  explicit InputGradCapture(std::shared_ptr<runtime::Node> producer)
      : producer_(std::move(producer)) {}
  const char* name() const override { return "checkpoint_input"; }
  bool saves_tensors() const override { return false; }
  bool accepts_any_grad_dtype() const override { return producer_->accepts_any_grad_dtype(); }
  DType preferred_grad_dtype() const override { return producer_->preferred_grad_dtype(); }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    grad = grad_output;
    return {};
  }

  Tensor grad;  ///< the input's gradient once the nested backward has run

 private:
  std::shared_ptr<runtime::Node> producer_;
};

// Puts the child's random counters back where they were when backward started, even if the
// recompute throws: the next forward must draw the masks it would have drawn without it.
class RandomStateRestore {
 public:
  explicit RandomStateRestore(Module& module) : module_(module), state_(module.random_state()) {}
  ~RandomStateRestore() { module_.set_random_state(state_); }  // same tree: cannot mismatch
  RandomStateRestore(const RandomStateRestore&) = delete;
  RandomStateRestore& operator=(const RandomStateRestore&) = delete;

 private:
  Module& module_;
  std::vector<std::uint64_t> state_;
};

// The one node a checkpointed forward records. Its edges are the producers of the inputs.
class CheckpointNode final : public runtime::Node {
 public:
  CheckpointNode(std::shared_ptr<Module> child, const std::vector<Tensor>& inputs,
                 std::vector<std::uint64_t> random_state, bool autocast, DType autocast_dtype)
      : child_(std::move(child)),
        inputs_(inputs),
        random_state_(std::move(random_state)),
        training_(child_->is_training()),
        autocast_(autocast),
        autocast_dtype_(autocast_dtype) {
    versions_.reserve(inputs_.size());
    for (const Tensor& x : inputs_) versions_.push_back(x.defined() ? x.version() : 0);
  }
  const char* name() const override { return "checkpoint"; }
  // The gradient is handed to the recomputed output's node, which converts it if it must: the
  // same conversion the unwrapped graph would make.
  bool accepts_any_grad_dtype() const override { return true; }
  void release_saved() override {
    inputs_.clear();
    inputs_.shrink_to_fit();
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override;

 private:
  void check_replayable() const;

  std::shared_ptr<Module> child_;
  std::vector<Tensor> inputs_;
  std::vector<std::uint64_t> versions_;
  std::vector<std::uint64_t> random_state_;  // the child's counters before the forward
  bool training_;
  bool autocast_;
  DType autocast_dtype_;
};

void CheckpointNode::check_replayable() const {
  MIXPREC_CHECK(child_->is_training() == training_, StateError, kOp,
                "the checkpointed " << child_->type_name() << " at '" << child_->path()
                    << "' was switched to " << (training_ ? "eval" : "training")
                    << " mode between its forward and its backward, so recomputing it would "
                       "not reproduce the forward (dropout); switch modes after backward");
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    MIXPREC_CHECK(!inputs_[i].defined() || inputs_[i].version() == versions_[i], StateError, kOp,
                  "input " << i << " of the checkpointed " << child_->type_name() << " at '"
                           << child_->path()
                           << "' was modified in place after its forward; the recomputation "
                              "would see other values. Modify a copy instead");
  }
}

std::vector<Tensor> CheckpointNode::backward(const Tensor& grad_output) {
  check_replayable();
  // Detached stand-ins for the inputs that need a gradient. A leaf's stand-in is a leaf (autocast
  // treats f32 leaves that require grad like parameters: one cached cast per region, which the
  // recompute must share among the leaf's uses as the forward did); any other input's is linked
  // to a capture node. One tensor passed twice (self-attention's {x, x, x}) gets one stand-in,
  // so its uses are summed inside the recomputed graph as the unwrapped graph sums them.
  const std::size_t n = inputs_.size();
  std::vector<Tensor> replay(n);
  std::vector<bool> owns(n, false);  // replay[i] is a stand-in of its own, not shared or as is
  std::vector<std::shared_ptr<InputGradCapture>> captures(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Tensor& x = inputs_[i];
    if (!x.defined() || i >= next.size() || !next[i].fn) {
      replay[i] = x;
      continue;
    }
    std::size_t first = i;
    for (std::size_t j = 0; j < i; ++j) {
      if (owns[j] && inputs_[j].impl_ptr() == x.impl_ptr()) first = j;
    }
    if (first != i) {
      replay[i] = replay[first];
      continue;
    }
    owns[i] = true;
    replay[i] = x.detach();
    if (x.is_leaf()) {
      replay[i].set_requires_grad(true);
    } else {
      captures[i] = std::make_shared<InputGradCapture>(next[i].fn);
      runtime::attach_all(replay[i], captures[i], {});
    }
  }

  Tensor out;
  {
    RandomStateRestore restore(*child_);
    child_->set_random_state(random_state_);
    runtime::GradModeGuard grad_on(true);
    runtime::Autocast region(autocast_, autocast_dtype_);
    out = (*child_)(replay);
  }
  MIXPREC_CHECK(out.shape() == output_shape && out.dtype() == output_dtype, StateError, kOp,
                "recomputing the checkpointed " << child_->type_name() << " at '" << child_->path()
                    << "' gave a " << mixprec::name(out.dtype()) << " " << to_string(out.shape())
                    << " output, but its forward gave " << mixprec::name(output_dtype) << " "
                    << to_string(output_shape) << "; its forward must depend only on its inputs, "
                       "parameters, random counters and autocast state");
  // The nested pass runs with autocast as the outer one does (off, after the region above),
  // and inherits the outer root's loss scale (runtime::backward).
  if (out.requires_grad()) runtime::backward(out, grad_output);

  std::vector<Tensor> grads(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (captures[i]) {
      grads[i] = std::move(captures[i]->grad);
    } else if (owns[i]) {
      grads[i] = replay[i].grad();
      replay[i].set_grad(Tensor());  // the input's own AccumulateGrad may then adopt it
    }
  }
  return grads;
}

}  // namespace

Checkpoint::Checkpoint(std::shared_ptr<Module> child) {
  MIXPREC_CHECK(child != nullptr, ValueError, kOp, "cannot wrap a null module");
  // Registered under "": the wrapper is transparent in parameter paths and state_dict keys.
  child_ = register_module("", std::move(child));
}

Tensor Checkpoint::forward(const Tensor& x) { return forward_inputs({x}); }

Tensor Checkpoint::forward_inputs(const std::vector<Tensor>& inputs) {
  if (!is_training() || !runtime::grad_enabled()) return (*child_)(inputs);
  std::vector<const Tensor*> edges;
  edges.reserve(inputs.size());
  bool needs_node = false;
  for (const Tensor& x : inputs) {
    edges.push_back(&x);
    needs_node = needs_node || (x.defined() && x.requires_grad());
  }
  if (!needs_node) {
    for (const Tensor& p : child_->parameters()) needs_node = needs_node || p.requires_grad();
  }
  if (!needs_node) return (*child_)(inputs);  // nothing below needs a gradient: no graph to save

  std::vector<std::uint64_t> random_state = child_->random_state();
  Tensor out;
  {
    runtime::NoGradGuard no_grad;  // the point: no activations are kept
    out = (*child_)(inputs);
  }
  // A fresh handle, so that linking the node never touches a tensor the child returned as it is
  // (an input, a view of one).
  out = out.detach();
  runtime::attach_all(out,
                       std::make_shared<CheckpointNode>(child_, inputs, std::move(random_state),
                                                        runtime::autocast_enabled(),
                                                        runtime::autocast_dtype()),
                       edges);
  return out;
}

std::shared_ptr<Checkpoint> checkpoint(std::shared_ptr<Module> module) {
  return std::make_shared<Checkpoint>(std::move(module));
}

}  // namespace mixprec::nn
