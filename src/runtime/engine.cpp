// The backward engine: dependency counting, then Kahn's algorithm from the root, so each node
// runs once, after every consumer of its output has contributed its gradient.
#include <unordered_map>

#include "mixprec/runtime/anomaly.h"
#include "mixprec/runtime/node.h"
#include "runtime/op_scope.h"
#include "kernels/elementwise.h"
#include "runtime/grad_util.h"
#include "tensor/tensor_methods.h"

namespace mixprec::runtime {
namespace {

// The loss-scale factor of the root of the backward pass running on this thread.
thread_local double tls_backward_loss_scale = 1.0;
// Number of backward passes running on this thread: more than one while a node's backward runs
// a backward of its own (nn::Checkpoint, on the sub-graph it recomputed).
thread_local int tls_backward_depth = 0;

// True if t can become a leaf's .grad as it is: nothing else refers to it or to its storage
// (the engine's own handle aside), it is contiguous and already has the leaf's dtype. Adopting
// it saves a copy of every gradient on every step (84 MB per step for the seed MLP).
bool adoptable_as_grad(const Tensor& t, DType leaf_dtype) {
  const mixprec::detail::TensorImpl& impl = t.impl();
  return t.impl_ptr().use_count() == 1 && impl.storage.use_count() == 1 &&
         impl.dtype == leaf_dtype && t.is_contiguous() && !impl.requires_grad;
}

// Writes the gradient into a leaf's .grad: the first time as a tensor of the leaf's dtype (so
// fp32 leaves always get fp32 gradients, whatever dtype the compute used), adopting the incoming
// gradient when no one else can see it, else a copy; afterwards added in place.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<mixprec::detail::TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  const char* name() const override { return "accumulate_grad"; }
  bool saves_tensors() const override { return false; }
  bool accepts_any_grad_dtype() const override { return true; }  // stored in the leaf's dtype
  DType preferred_grad_dtype() const override { return leaf_->dtype; }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    if (!leaf_->grad) {
      leaf_->grad_scale = tls_backward_loss_scale;
      if (adoptable_as_grad(grad_output, leaf_->dtype)) {
        auto adopted = std::make_shared<mixprec::detail::TensorImpl>();
        const mixprec::detail::TensorImpl& in = grad_output.impl();
        adopted->storage = in.storage;
        adopted->storage->set_category(MemoryCategory::gradient);
        adopted->shape = in.shape;
        adopted->strides = in.strides;
        adopted->offset = in.offset;
        adopted->dtype = in.dtype;
        leaf_->grad = std::move(adopted);
        runtime::detail::add_work(0.0, 0.0);  // tells the profiler nothing was copied
      } else {
        Tensor g = runtime::detail::materialize(grad_output, leaf_->dtype, MemoryCategory::gradient);
        leaf_->grad = g.impl_ptr();
      }
    } else {
      Tensor existing(leaf_->grad);
      MIXPREC_CHECK(existing.shape() == grad_output.shape(), ShapeError, "backward",
                    "existing .grad has shape " << to_string(existing.shape())
                                                << " but the new gradient has "
                                                << to_string(grad_output.shape()));
      MIXPREC_CHECK(leaf_->grad_scale == tls_backward_loss_scale, StateError, "backward",
                    "this gradient is scaled by " << tls_backward_loss_scale
                        << " but .grad already holds gradients scaled by " << leaf_->grad_scale
                        << "; keep one loss scale across accumulated micro-batches (update the "
                           "GradScaler only after optimizer steps) or zero the gradients");
      runtime::detail::add_into(existing, grad_output);
    }
    if (leaf_->post_accumulate_grad_hook) (*leaf_->post_accumulate_grad_hook)();
    return {};
  }

 private:
  std::shared_ptr<mixprec::detail::TensorImpl> leaf_;
};

}  // namespace

void set_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook) {
  MIXPREC_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(), StateError,
                "set_post_accumulate_grad_hook", "needs a leaf tensor that requires grad");
  leaf.impl().post_accumulate_grad_hook =
      hook ? std::make_shared<std::function<void()>>(std::move(hook)) : nullptr;
}

namespace {

// Identity in backward, after showing the gradient to an observer. Saves nothing, so it costs
// no memory.
class GradientObserver final : public Node {
 public:
  explicit GradientObserver(std::function<void(const Tensor&)> observer) : observer_(std::move(observer)) {}
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    observer_(grad_output);
    return {grad_output};
  }
  const char* name() const override { return "observe_gradient"; }
  bool saves_tensors() const override { return false; }

 private:
  std::function<void(const Tensor&)> observer_;
};

}  // namespace

Tensor observe_gradient(const Tensor& t, std::function<void(const Tensor& grad)> observer) {
  if (!grad_enabled() || !t.requires_grad()) return t;
  Tensor alias = t.detach();
  attach(alias, std::make_shared<GradientObserver>(std::move(observer)), {&t});
  return alias;
}

namespace {

std::shared_ptr<Node> accumulator_of(const Tensor& leaf) {
  mixprec::detail::TensorImpl& impl = leaf.impl();
  if (auto existing = impl.grad_accumulator.lock()) return existing;
  auto acc = std::make_shared<AccumulateGrad>(leaf.impl_ptr());
  acc->output_shape = impl.shape;
  acc->output_dtype = impl.dtype;
  impl.grad_accumulator = acc;
  return acc;
}

std::shared_ptr<Node> producer_of(const Tensor& t) {
  if (!t.requires_grad()) return nullptr;
  if (t.grad_fn()) return t.grad_fn();
  return accumulator_of(t);
}

}  // namespace

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  }
  return false;
}

void attach(Tensor& output, std::shared_ptr<Node> node, std::initializer_list<const Tensor*> inputs) {
  attach_all(output, std::move(node), std::vector<const Tensor*>(inputs));
}

void attach_all(Tensor& output, std::shared_ptr<Node> node, const std::vector<const Tensor*>& inputs) {
  node->next.clear();
  node->next.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    node->next.push_back(Edge{(t != nullptr && t->defined()) ? producer_of(*t) : nullptr});
  }
  node->output_shape = output.shape();
  node->output_dtype = output.dtype();
  if (anomaly_enabled()) [[unlikely]] {
    node->anomaly_module = anomaly_detail::current_module();
    anomaly_detail::check_forward(node->name(), output, inputs, node->anomaly_module);
  }
  mixprec::detail::TensorImpl& impl = output.impl();
  impl.grad_fn = std::move(node);
  impl.requires_grad = true;
}

void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  MIXPREC_CHECK(root.requires_grad(), StateError, "backward",
                "the tensor does not require grad: no input of the computation has "
                "requires_grad set (or it ran under NoGradGuard)");
  Tensor seed = gradient;
  if (!seed.defined()) {
    MIXPREC_CHECK(root.numel() == 1, StateError, "backward",
                  "a gradient can be created implicitly only for a one-element output; pass a "
                  "gradient of shape " << to_string(root.shape()));
    seed = Tensor::ones(root.shape(), root.dtype());
  }
  MIXPREC_CHECK(seed.shape() == root.shape(), ShapeError, "backward",
                "gradient shape " << to_string(seed.shape()) << " differs from output shape "
                                  << to_string(root.shape()));
  std::shared_ptr<Node> root_fn = producer_of(root);

  // Count, for each node, how many edges point at it from nodes reachable from the root.
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack{root_fn.get()};
  pending[root_fn.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.fn) continue;
      auto [it, inserted] = pending.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.fn.get());
    }
  }

  NoGradGuard no_grad;  // backward formulas are not themselves recorded
  runtime::detail::PhaseScope profile_phase(runtime::Phase::backward);
  struct ScaleScope {     // restores the thread's loss scale and depth even if backward throws
    double saved = tls_backward_loss_scale;
    ScaleScope() { ++tls_backward_depth; }
    ~ScaleScope() {
      tls_backward_loss_scale = saved;
      --tls_backward_depth;
    }
  } scale_scope;
  // A backward started inside a node's backward (a checkpoint's recomputed block) is part of the
  // outer pass: the gradient it is seeded with carries the outer root's loss scale, so the leaves
  // it reaches must be tagged with that scale, not with the 1 of its unscaled root.
  const bool nested = tls_backward_depth > 1;
  if (!nested || root.impl().loss_scale != 1.0) tls_backward_loss_scale = root.impl().loss_scale;
  std::unordered_map<Node*, Tensor> grads;
  grads[root_fn.get()] = seed;
  std::vector<std::shared_ptr<Node>> ready{root_fn};
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    std::vector<Tensor> input_grads;
    auto found = grads.find(node.get());
    if (found != grads.end()) {  // a node can be reached by edges that carried no gradient
      MIXPREC_CHECK(!node->released || !node->saves_tensors(), StateError, "backward",
                    "trying to backward through the graph a second time (through '"
                        << node->name() << "'); pass retain_graph=true to the first backward");
      Tensor g = std::move(found->second);
      grads.erase(found);
      MIXPREC_ASSERT(g.shape() == node->output_shape);
      // fp8 outputs receive f32 gradients (gradient_dtype): a gradient is never rounded to fp8.
      const DType grad_dtype = gradient_dtype(node->output_dtype);
      if (g.dtype() != grad_dtype && !node->accepts_any_grad_dtype()) g = g.to(grad_dtype);
      {  // the profiler times each node under its name; ops it calls are folded into it
        runtime::detail::OpScope prof(runtime::detail::ScopeKind::node, node->name());
        input_grads = node->backward(g);
        prof.done_node(*node, g, input_grads);
      }
      if (anomaly_enabled()) [[unlikely]] {
        anomaly_detail::check_backward(node->name(), node->anomaly_module, g, input_grads,
                               tls_backward_loss_scale);
      }
      if (!retain_graph && node->saves_tensors()) {
        node->release_saved();
        node->released = true;
      }
    }
    for (std::size_t i = 0; i < node->next.size(); ++i) {
      const std::shared_ptr<Node>& next = node->next[i].fn;
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        auto [it, inserted] = grads.try_emplace(next.get(), input_grads[i]);
        if (!inserted) it->second = runtime::detail::sum_gradients(it->second, input_grads[i]);
      }
      if (--pending[next.get()] == 0) ready.push_back(next);
    }
  }
}

}  // namespace mixprec::runtime

namespace mixprec {
namespace {
// Tensor::backward runs this engine (tensor/tensor_methods.h), installed while the library loads.
[[maybe_unused]] const bool kBackwardInstalled = [] {
  detail::tensor_method_table().backward = [](const Tensor& self, const Tensor& gradient,
                                              bool retain_graph) {
    runtime::backward(self, gradient, retain_graph);
  };
  return true;
}();
}  // namespace
}  // namespace mixprec
