#include "mixprec/nn/module.h"

#include <optional>
#include <set>

#include "kernels/copy.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/anomaly.h"
#include "mixprec/runtime/node.h"

namespace mixprec::nn {

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  MIXPREC_CHECK(t.defined(), ValueError, "Module::register_parameter",
                "parameter '" << name << "' is undefined");
  t.set_category(MemoryCategory::parameter);
  t.set_requires_grad(true);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

std::string join_path(const std::string& parent, const std::string& name) {
  if (name.empty()) return parent;
  return parent.empty() ? name : parent + "." + name;
}

void Module::collect(const std::string& prefix, bool params, NamedTensors& out) const {
  for (const auto& [name, t] : params ? params_ : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) {
    child->collect(name.empty() ? prefix : prefix + name + ".", params, out);
  }
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, out);
  return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t);
  for (auto& [name, t] : named_buffers()) out.emplace(name, t);
  return out;
}

void Module::upgrade_tree(std::map<std::string, Tensor>& state, const std::string& prefix,
                          std::vector<StateMerge>& merges) const {
  upgrade_own_state(state, prefix, merges);
  for (const auto& [name, child] : children_) {
    child->upgrade_tree(state, name.empty() ? prefix : prefix + name + ".", merges);
  }
}

std::vector<StateMerge> Module::upgrade_state(std::map<std::string, Tensor>& state) const {
  std::vector<StateMerge> merges;
  upgrade_tree(state, "", merges);
  return merges;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state_arg, bool strict) {
  const char* op = "load_state_dict";
  // Handles only: the copy costs a map of pointers, and the caller's map stays as it was.
  std::map<std::string, Tensor> state = state_arg;
  upgrade_state(state);
  std::map<std::string, Tensor> own = state_dict();
  if (strict) {
    for (const auto& [name, t] : state) {
      MIXPREC_CHECK(own.count(name) != 0, ValueError, op,
                    "unexpected key '" << name << "': the state comes from a different model");
    }
  }
  runtime::NoGradGuard no_grad;
  for (auto& [name, dst] : own) {
    auto it = state.find(name);
    if (it == state.end()) {
      MIXPREC_CHECK(!strict, ValueError, op,
                    "missing key '" << name << "': the state comes from a different model");
      continue;
    }
    const Tensor& src = it->second;
    MIXPREC_CHECK(src.shape() == dst.shape(), ShapeError, op,
                  "'" << name << "' has shape " << to_string(src.shape()) << " in the state but "
                      << to_string(dst.shape()) << " in the model");
    kernels::copy(dst.shape(), {src.data_ptr(), src.dtype(), src.strides()},
                  {dst.data_ptr(), dst.dtype(), dst.strides()});
    dst.bump_version();
  }
}

std::string Module::path() const {
  if (parent_ == nullptr) return "";
  return join_path(parent_->path(), name_in_parent_);
}

void Module::collect_random_state(std::vector<std::uint64_t>& out) const {
  for (std::uint64_t c : own_random_state()) out.push_back(c);
  for (const auto& [name, child] : children_) child->collect_random_state(out);
}

void Module::restore_random_state(const std::vector<std::uint64_t>& state, std::size_t& pos) {
  const std::size_t n = own_random_state().size();
  if (n != 0) {
    MIXPREC_ASSERT(pos + n <= state.size());  // set_random_state checked the total
    set_own_random_state(std::span<const std::uint64_t>(state.data() + pos, n));
    pos += n;
  }
  for (const auto& [name, child] : children_) child->restore_random_state(state, pos);
}

std::vector<std::uint64_t> Module::random_state() const {
  std::vector<std::uint64_t> out;
  collect_random_state(out);
  return out;
}

void Module::set_random_state(const std::vector<std::uint64_t>& state) {
  // Checked before anything changes, so a mismatched state leaves every counter as it was.
  const std::size_t expected = random_state().size();
  MIXPREC_CHECK(state.size() == expected, ValueError, "set_random_state",
                "the state has " << state.size() << " counters but this module tree has "
                                 << expected << "; it comes from a different model");
  std::size_t pos = 0;
  restore_random_state(state, pos);
}

namespace {
// The observer of leaf modules on this thread (ForwardObserverScope); null almost always.
thread_local ForwardObserver* tls_forward_observer = nullptr;

// How anomaly errors name a running module: "'features.3' (Conv2d)".
std::string describe_for_anomaly(const Module& m) {
  const std::string path = m.path();
  return "'" + (path.empty() ? std::string("<root>") : path) + "' (" + m.type_name() + ")";
}
}  // namespace

ForwardObserverScope::ForwardObserverScope(ForwardObserver* observer)
    : previous_(tls_forward_observer) {
  tls_forward_observer = observer;
}

ForwardObserverScope::~ForwardObserverScope() { tls_forward_observer = previous_; }

Tensor Module::operator()(const Tensor& x_arg) {
  Tensor converted;
  if (has_input_format_ && x_arg.dim() == 4) [[unlikely]] converted = x_arg.contiguous(input_format_);
  const Tensor& x = converted.defined() ? converted : x_arg;
  std::optional<runtime::anomaly_detail::ModuleScope> anomaly_scope;
  if (runtime::anomaly_enabled()) [[unlikely]] anomaly_scope.emplace(*this, &describe_for_anomaly);
  // One thread-local test when no observer is installed; observers see leaf modules only, so
  // each value is observed once (a Sequential's output is its last child's).
  if (ForwardObserver* observer = tls_forward_observer; observer != nullptr && children_.empty())
      [[unlikely]] {
    return observer->on_leaf_forward(*this, x, call_forward(x));
  }
  return call_forward(x);
}

bool Module::runs_plainly() const {
  return !has_compute_override_ && !runtime::anomaly_enabled() &&
         (tls_forward_observer == nullptr || !children_.empty());
}

Tensor Module::forward_inputs(const std::vector<Tensor>& inputs) {
  MIXPREC_CHECK(inputs.size() == 1, ValueError, type_name().c_str(),
                "takes one input, got " << inputs.size()
                                        << "; pass a single tensor (modules with several inputs, "
                                           "such as MultiHeadAttention, say so in their docs)");
  return forward(inputs[0]);
}

Tensor Module::operator()(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return (*this)(inputs[0]);
  std::optional<runtime::anomaly_detail::ModuleScope> anomaly_scope;
  if (runtime::anomaly_enabled()) [[unlikely]] anomaly_scope.emplace(*this, &describe_for_anomaly);
  if (!has_compute_override_) return forward_inputs(inputs);
  const bool lower = compute_override_ != DType::f32;
  runtime::Autocast region(lower, lower ? compute_override_ : runtime::autocast_dtype());
  std::vector<Tensor> widened = inputs;
  for (Tensor& x : widened) {
    if (!lower && x.defined() && x.dtype() != DType::f32) x = x.to(DType::f32);
  }
  return forward_inputs(widened);
}

Tensor Module::run_in_compute_dtype(const Tensor& x,
                                    const std::function<Tensor(const Tensor&)>& f) {
  if (!has_compute_override_) return f(x);
  const bool lower = compute_override_ != DType::f32;
  runtime::Autocast region(lower, lower ? compute_override_ : runtime::autocast_dtype());
  // Inputs arriving in 16 bits are widened so an f32 module really computes in f32.
  return f(!lower && x.dtype() != DType::f32 ? x.to(DType::f32) : x);
}

Tensor Module::call_forward(const Tensor& x) {
  if (!has_compute_override_) return forward(x);  // the common case, without a std::function
  return run_in_compute_dtype(x, [this](const Tensor& in) { return forward(in); });
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

std::int64_t Module::parameter_count() const {
  std::int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

}  // namespace mixprec::nn
