#pragma once
/// Custom ops defined by a forward and a backward, for users of the public headers (PyTorch's
/// torch.autograd.Function with torch.amp.custom_fwd / custom_bwd):
///
///   // swish(x) = x * sigmoid(x); d swish / dx = s + x * (s - s^2), s = sigmoid(x)
///   const runtime::CustomFunction swish{
///       "swish",
///       [](runtime::FunctionContext& ctx, const std::vector<Tensor>& in) {
///         ctx.save_for_backward({in[0]});
///         return in[0] * sigmoid(in[0]);
///       },
///       [](runtime::FunctionContext& ctx, const Tensor& dy) -> std::vector<Tensor> {
///         const Tensor& x = ctx.saved_tensors()[0];
///         const Tensor s = sigmoid(x);
///         return {dy * (s + x * (s - s * s))};  // one gradient per input
///       }};
///   Tensor y = runtime::apply(swish, {x});  // differentiable like any other op
///
/// The forward runs with gradient recording off (its ops are not taped: the backward you write
/// replaces theirs), and the backward runs under the autocast state that was active during the
/// forward (custom_bwd), so a bf16 forward gets a bf16-style backward even though
/// Tensor::backward() is usually called after the Autocast region ended. Set cast_inputs to run
/// the forward in one precision inside autocast regions (custom_fwd(cast_inputs=...)).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::runtime {

/// What a custom op's forward hands to its backward. Made by apply(), one per call.
class FunctionContext {
 public:
  /// name: the function's, for error messages. needs_input_grad: one flag per input.
  FunctionContext(std::string name, std::vector<bool> needs_input_grad);

  /// Keeps tensors for backward (inputs, outputs or intermediates; undefined ones allowed).
  /// They are stored detached, so saving the output makes no reference cycle, and with their
  /// version, so a tensor modified in place before backward is caught instead of silently
  /// giving wrong gradients. Replaces anything saved before.
  void save_for_backward(std::vector<Tensor> tensors);
  /// The tensors saved in forward, in order. StateError if one was modified in place since it
  /// was saved, or if the graph was freed by an earlier backward (pass retain_graph=true).
  const std::vector<Tensor>& saved_tensors() const;

  /// Keeps a number for backward (an exponent, a scale); a key saved again is overwritten.
  void save_scalar(const std::string& key, double value);
  /// The number saved under key; ValueError naming the key and the function if there is none.
  double scalar(const std::string& key) const;

  /// Whether input i requires a gradient (false for all when no node was recorded), so a
  /// backward can skip gradients nobody will receive (return an undefined Tensor for them).
  const std::vector<bool>& needs_input_grad() const { return needs_input_grad_; }
  /// The function's name.
  const std::string& name() const { return name_; }

  /// Drops the saved tensors and scalars (the engine calls it once backward has run).
  void release();

 private:
  std::string name_;
  std::vector<bool> needs_input_grad_;
  std::vector<Tensor> saved_;
  std::vector<std::uint64_t> saved_versions_;
  std::map<std::string, double> scalars_;
  bool released_ = false;
};

/// A differentiable op given by its forward and backward (plain functions or lambdas; what
/// differs between calls belongs in the FunctionContext, not in captures).
struct CustomFunction {
  /// out = forward(ctx, inputs), run with gradient recording off. inputs are the tensors given
  /// to apply() (cast first if cast_inputs applies). Returns one defined tensor.
  using Forward = std::function<Tensor(FunctionContext&, const std::vector<Tensor>&)>;
  /// Gradients of the inputs given the gradient of the output (in the output's shape and
  /// dtype): one per input, in order, each with its input's shape, or an undefined Tensor where
  /// no gradient flows. Any floating dtype: each gradient is converted to its input's dtype.
  /// Runs with gradient recording off and the forward's autocast state (enabled, dtype).
  using Backward = std::function<std::vector<Tensor>(FunctionContext&, const Tensor& grad_output)>;

  CustomFunction() = default;
  /// All the parts at once (a constructor rather than aggregate initialisation, so leaving out
  /// cast_inputs draws no -Wmissing-field-initializers warning).
  CustomFunction(std::string name_, Forward forward_, Backward backward_,
                 std::optional<DType> cast_inputs_ = std::nullopt)
      : name(std::move(name_)),
        forward(std::move(forward_)),
        backward(std::move(backward_)),
        cast_inputs(cast_inputs_) {}

  /// Names the op in error messages, anomaly reports and the profiler, e.g. "swish".
  std::string name;
  Forward forward;
  Backward backward;
  /// When set and autocast is enabled at the call: the forward sees its inputs cast to this
  /// dtype (differentiably: their gradients come back in the callers' dtypes) and runs with
  /// autocast off, and so does the backward (runtime::run_with_inputs_cast). Unset: the forward runs
  /// under the caller's autocast state, inputs as given.
  std::optional<DType> cast_inputs;
};

/// Runs fn on inputs (any number, undefined ones allowed) and, when gradient recording is on
/// and some input requires grad, links the output to them with one node running fn.backward.
/// The output is always a new tensor handle, never one of the inputs. ValueError if fn has no
/// forward or backward, if forward returns an undefined tensor, if backward returns a number
/// of gradients other than the number of inputs or a gradient for an undefined input;
/// ShapeError if a gradient's shape differs from its input's; DTypeError if cast_inputs is a
/// storage-only dtype (fp8). Errors name fn.name.
Tensor apply(const CustomFunction& fn, const std::vector<Tensor>& inputs);

}  // namespace mixprec::runtime
