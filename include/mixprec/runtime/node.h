#pragma once
/// The autograd tape: every differentiable op records a Node that knows how to turn the gradient
/// of its output into gradients of its inputs. Nodes link to the nodes of their inputs (edges),
/// and backward() walks them in reverse topological order.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::runtime {

class Node;

/// Link from a node to the producer of one of its inputs (null when that input needs no gradient).
struct Edge {
  std::shared_ptr<Node> fn;
};

/// One recorded op. Subclasses save what their backward needs and implement backward().
class Node {
 public:
  virtual ~Node() = default;
  /// Gradients of the inputs (one per edge, in order; undefined where no gradient flows) given
  /// the gradient of the output, which has the output's shape and dtype.
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;
  /// Op name used in error messages and anomaly reports, e.g. "linear".
  virtual const char* name() const = 0;
  /// Frees saved tensors once backward has run (unless the graph is retained).
  virtual void release_saved() {}
  /// False for nodes that save no tensors: they may be run by several backward passes (e.g. the
  /// cast of a weight that autocast caches and reuses across forwards in one region).
  virtual bool saves_tensors() const { return true; }
  /// Whether backward() takes a gradient of any dtype (e.g. a cast, which converts it anyway);
  /// for other nodes the engine first converts the gradient to output_dtype.
  virtual bool accepts_any_grad_dtype() const { return false; }
  /// The gradient dtype this node would like to receive. A producer may compute the gradient
  /// for this input directly in it when this node accepts_any_grad_dtype(): e.g. a bf16 linear
  /// whose weight is a cast of an f32 master writes dW in f32 straight from its GEMM's f32
  /// accumulator, instead of rounding it to bf16 and converting it back.
  virtual DType preferred_grad_dtype() const { return output_dtype; }

  std::vector<Edge> next;      ///< producers of the inputs
  Shape output_shape;          ///< shape of the output this node produced
  DType output_dtype = DType::f32;
  bool released = false;       ///< set after a non-retained backward ran through this node
  std::string anomaly_module;  ///< module that ran the forward (recorded only in anomaly mode)
};

/// Turns on gradient recording for this thread (the default) until destroyed... or off.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

/// Disables gradient recording in a scope (like torch.no_grad()).
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

/// True when ops on this thread record nodes for backward.
bool grad_enabled() noexcept;

/// True if an op with these inputs must record a node (grad mode on, some input requires grad).
bool needs_grad(std::initializer_list<const Tensor*> inputs);

/// Links `output` to `node`: fills node's edges from the inputs (one per input, in order),
/// records output shape/dtype and marks output as requiring grad. Call only if needs_grad().
void attach(Tensor& output, std::shared_ptr<Node> node, std::initializer_list<const Tensor*> inputs);
/// attach() for a variable number of inputs.
void attach_all(Tensor& output, std::shared_ptr<Node> node, const std::vector<const Tensor*>& inputs);

/// Calls hook each time a backward pass has accumulated a gradient into the leaf's .grad (after
/// the addition, so .grad holds it): once per pass that reaches the leaf, since the engine sums
/// a node's incoming gradients before running it (PyTorch's register_post_accumulate_grad_hook).
/// Data parallelism uses it to send gradients while backward is still running. One hook per
/// leaf; an empty function removes it. StateError unless leaf is a leaf that requires grad.
void set_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook);

/// Returns an alias of `t` (the same storage, no copy) that backward passes through unchanged,
/// handing the incoming gradient to `observer` first: how diagnostics and the precision
/// autopilot watch the gradient of a layer's output without changing any op. Returns `t`
/// itself when no node would be recorded (grad mode off, or t does not require grad).
Tensor observe_gradient(const Tensor& t, std::function<void(const Tensor& grad)> observer);

/// Back-propagates gradient (default: 1 for a one-element root) from root through the graph.
/// Re-entrant: a node's backward may run a backward of its own (nn::Checkpoint does, over the
/// sub-graph it recomputes); that inner pass inherits the outer root's loss scale.
void backward(const Tensor& root, const Tensor& gradient = Tensor(), bool retain_graph = false);

}  // namespace mixprec::runtime
