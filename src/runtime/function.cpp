// Custom functions: apply() runs the user's forward untaped and records one CustomNode holding
// the context and the autocast state of the forward; the node checks what the user's backward
// returns before the engine routes it, so a mistake is reported against the user's function
// instead of tripping an engine invariant later.
#include "mixprec/runtime/function.h"

#include <memory>
#include <utility>

#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "runtime/op_scope.h"

namespace mixprec::runtime {

FunctionContext::FunctionContext(std::string name, std::vector<bool> needs_input_grad)
    : name_(std::move(name)), needs_input_grad_(std::move(needs_input_grad)) {}

void FunctionContext::save_for_backward(std::vector<Tensor> tensors) {
  saved_versions_.assign(tensors.size(), 0);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) continue;
    tensors[i] = tensors[i].detach();
    saved_versions_[i] = tensors[i].version();
  }
  saved_ = std::move(tensors);
}

const std::vector<Tensor>& FunctionContext::saved_tensors() const {
  MIXPREC_CHECK(!released_, StateError, name_.c_str(),
                "the tensors saved for backward were freed by an earlier backward; pass "
                "retain_graph=true to the first backward to run it twice");
  for (std::size_t i = 0; i < saved_.size(); ++i) {
    MIXPREC_CHECK(!saved_[i].defined() || saved_[i].version() == saved_versions_[i], StateError, name_.c_str(),
                  "saved tensor " << i << " (shape " << to_string(saved_[i].shape())
                                  << ") was modified in place after the forward saved it (version "
                                  << saved_versions_[i] << ", now " << saved_[i].version()
                                  << "), so its backward would use wrong values; run backward before "
                                     "modifying it (e.g. before optimizer.step()), or save a clone()");
  }
  return saved_;
}

void FunctionContext::save_scalar(const std::string& key, double value) { scalars_[key] = value; }

double FunctionContext::scalar(const std::string& key) const {
  const auto it = scalars_.find(key);
  MIXPREC_CHECK(it != scalars_.end(), ValueError, name_.c_str(),
                "no scalar '" << key << "' was saved; call ctx.save_scalar(\"" << key << "\", value) in forward"
                              << (released_ ? " (or the graph was freed by an earlier backward)" : ""));
  return it->second;
}

void FunctionContext::release() {
  saved_.clear();
  saved_versions_.clear();
  scalars_.clear();
  released_ = true;
}

namespace {

struct InputInfo {
  bool defined = false;
  Shape shape;
  DType dtype = DType::f32;
};

class CustomNode final : public Node {
 public:
  CustomNode(const CustomFunction& fn, std::shared_ptr<FunctionContext> ctx, std::vector<InputInfo> inputs,
             bool autocast_enabled, DType autocast_dtype)
      : name_(fn.name),
        backward_(fn.backward),
        ctx_(std::move(ctx)),
        inputs_(std::move(inputs)),
        autocast_enabled_(autocast_enabled),
        autocast_dtype_(autocast_dtype) {}

  const char* name() const override { return name_.c_str(); }
  void release_saved() override { ctx_->release(); }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    std::vector<Tensor> grads;
    {
      runtime::Autocast forward_state(autocast_enabled_, autocast_dtype_);  // custom_bwd
      grads = backward_(*ctx_, grad_output);
    }
    const char* op = name_.c_str();
    MIXPREC_CHECK(grads.size() == inputs_.size(), ValueError, op,
                  "the custom function's backward returned "
                      << grads.size() << " gradient(s) but it has " << inputs_.size()
                      << " input(s); return one per input, in order, with an undefined "
                         "Tensor() where no gradient flows");
    for (std::size_t i = 0; i < grads.size(); ++i) {
      Tensor& g = grads[i];
      if (!g.defined()) continue;
      const InputInfo& in = inputs_[i];
      MIXPREC_CHECK(in.defined, ValueError, op,
                    "the custom function's backward returned a gradient for input "
                        << i << ", which was an undefined tensor; return an undefined Tensor() for it");
      MIXPREC_CHECK(g.shape() == in.shape, ShapeError, op,
                    "the custom function's backward returned a gradient of shape "
                        << to_string(g.shape()) << " for input " << i << " of shape " << to_string(in.shape)
                        << "; a gradient has its input's shape (sum it over broadcast dimensions)");
      if (!next[i].fn) {
        g = Tensor();  // nobody receives it
        continue;
      }
      const DType want = gradient_dtype(in.dtype);
      if (g.dtype() != want) g = g.to(want);
    }
    return grads;
  }

 private:
  std::string name_;
  std::function<std::vector<Tensor>(FunctionContext&, const Tensor&)> backward_;
  std::shared_ptr<FunctionContext> ctx_;
  std::vector<InputInfo> inputs_;
  bool autocast_enabled_;
  DType autocast_dtype_;
};

// The forward and the node, on inputs already cast (or not) for the forward.
Tensor run(const CustomFunction& fn, const std::vector<Tensor>& inputs) {
  const bool autocast_enabled = runtime::autocast_enabled();
  const DType autocast_dtype = runtime::autocast_dtype();
  bool record = false;
  std::vector<bool> needs(inputs.size(), false);
  if (grad_enabled()) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      needs[i] = inputs[i].defined() && inputs[i].requires_grad();
      record = record || needs[i];
    }
  }
  auto ctx = std::make_shared<FunctionContext>(fn.name, std::move(needs));
  Tensor out;
  {
    // One profile row for the forward, named after the function: the ops it calls fold into it
    // (without it, their kernels' time showed as unattributed).
    detail::OpScope prof(detail::ScopeKind::op, fn.name.c_str());
    NoGradGuard no_grad;
    out = fn.forward(*ctx, inputs);
    if (out.defined()) prof.done_composite(out);
  }
  MIXPREC_CHECK(out.defined(), ValueError, fn.name.c_str(), "forward returned an undefined tensor; return the output");
  out = out.detach();  // a fresh handle: never re-link an input (an identity forward returns it)
  if (!record) return out;
  std::vector<InputInfo> info(inputs.size());
  std::vector<const Tensor*> ptrs(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    ptrs[i] = &inputs[i];
    if (inputs[i].defined()) info[i] = InputInfo{true, inputs[i].shape(), inputs[i].dtype()};
  }
  attach_all(out, std::make_shared<CustomNode>(fn, std::move(ctx), std::move(info), autocast_enabled, autocast_dtype),
             ptrs);
  return out;
}

}  // namespace

Tensor apply(const CustomFunction& fn, const std::vector<Tensor>& inputs) {
  MIXPREC_CHECK(!fn.name.empty(), ValueError, "runtime::apply",
                "the custom function has no name; set CustomFunction::name (it names the op in errors and "
                "profiles)");
  const char* op = fn.name.c_str();
  MIXPREC_CHECK(fn.forward && fn.backward, ValueError, op,
                "the custom function has no " << (fn.forward ? "backward" : "forward")
                                              << "; set both CustomFunction::forward and ::backward");
  if (fn.cast_inputs) require_compute_dtype(op, *fn.cast_inputs);
  if (fn.cast_inputs && runtime::autocast_enabled()) {
    return runtime::run_with_inputs_cast(*fn.cast_inputs, inputs,
                                     [&fn](const std::vector<Tensor>& cast) { return run(fn, cast); });
  }
  return run(fn, inputs);
}

}  // namespace mixprec::runtime
