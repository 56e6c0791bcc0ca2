#pragma once
/// Activation checkpointing (gradient checkpointing): trade compute for memory by keeping only a
/// module's inputs in forward and recomputing its activations during backward. Not to be
/// confused with io/checkpoint.h, which saves training state to disk.
#include <memory>
#include <string>
#include <vector>

#include "mixprec/nn/module.h"

namespace mixprec::nn {

/// Wraps a module so that, in training with grad enabled, its forward keeps no activations: the
/// child runs under NoGradGuard and one autograd node saves only the inputs, the autocast state
/// (enabled, dtype) and the child's random_state() (dropout counters). Backward replays that
/// autocast and random state, re-runs the child with grad enabled on detached copies of the
/// inputs, back-propagates the incoming gradient through the recomputed graph (a nested
/// runtime::backward), returns the inputs' gradients and leaves the counters where they were.
/// Parameter gradients accumulate into the parameters as usual, and are bit-identical to those
/// of the unwrapped module when its forward is deterministic given the counters (all mixprec
/// layers are). In eval mode or with grad disabled it is exactly the child's forward.
///
/// The child is registered under the empty name, so it is transparent in paths: a GPT whose
/// blocks are checkpointed has the same parameter paths and state_dict keys as one whose blocks
/// are not, and their files interchange. Inputs and outputs are the child's (any number of
/// inputs through forward_inputs; one output).
///
/// Limits: the recomputed output must have the shape and dtype of the original (StateError
/// otherwise); the inputs must not be modified in place between forward and backward, and the
/// child must not be switched to eval mode in between (StateError); an input that is also used
/// outside the child receives the child's gradient summed first, so with three or more uses
/// the rounding of that sum can differ from the unwrapped model's.
class Checkpoint : public Module {
 public:
  /// ValueError if child is null.
  explicit Checkpoint(std::shared_ptr<Module> child);
  Tensor forward(const Tensor& x) override;
  Tensor forward_inputs(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "Checkpoint"; }
  /// The wrapped module.
  const std::shared_ptr<Module>& child() const { return child_; }

 private:
  std::shared_ptr<Module> child_;
};

/// A shared Checkpoint of module: nn::checkpoint(std::make_shared<TransformerBlock>(...)).
std::shared_ptr<Checkpoint> checkpoint(std::shared_ptr<Module> module);

}  // namespace mixprec::nn
