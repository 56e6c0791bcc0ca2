#pragma once
/// Module: the base of layers and models. It owns named parameters (trainable leaves, filed as
/// MemoryCategory::parameter), named buffers (state that is saved but not trained, e.g. running
/// statistics) and named child modules, and switches between training and evaluation mode.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module;

/// One change Module::upgrade_state made: the entries of the modules at paths `from` (in
/// order) became one module's at path `into` (e.g. "blocks.0.attn.q_proj", "...k_proj",
/// "...v_proj" -> "blocks.0.attn.qkv_proj", concatenated along dimension 0).
struct StateMerge {
  std::string into;
  std::vector<std::string> from;
};

/// The dotted path of a child named `name` under a module at `parent` ("" for the root): what
/// state_dict keys and diagnostics use. An empty name is transparent (the child shares its
/// parent's path), which is how wrappers such as Checkpoint keep the wrapped module's paths.
std::string join_path(const std::string& parent, const std::string& name);

/// Watches leaf modules (modules without children) run, for diagnostics such as `mixprec
/// inspect`, without changing any layer. Installed per thread by ForwardObserverScope; with
/// none installed, Module::operator() pays one thread-local test.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  /// Called by operator() of a leaf module after it computed `output` from `input`. Returns
  /// what operator() returns: `output`, or a tensor with the same values standing in for it
  /// (e.g. an identity op whose backward records the gradient that flows through it).
  virtual Tensor on_leaf_forward(Module& module, const Tensor& input, const Tensor& output) = 0;
};

/// Installs an observer for this thread while alive (nullptr: none) and restores the previous
/// one afterwards, so scopes nest.
class ForwardObserverScope {
 public:
  explicit ForwardObserverScope(ForwardObserver* observer);
  ~ForwardObserverScope();
  ForwardObserverScope(const ForwardObserverScope&) = delete;
  ForwardObserverScope& operator=(const ForwardObserverScope&) = delete;

 private:
  ForwardObserver* previous_;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The layer's computation. Shapes and dtypes are documented by each subclass.
  virtual Tensor forward(const Tensor& x) = 0;
  /// forward(), inside this module's compute-dtype override if it has one; a leaf module's
  /// output then goes through this thread's ForwardObserver, if one is installed.
  Tensor operator()(const Tensor& x);
  /// The computation of a module with several inputs (attention: query, key, value, mask).
  /// Modules that take several override it; the default takes exactly one input and runs
  /// forward(inputs[0]), and refuses any other count with a ValueError naming the module.
  virtual Tensor forward_inputs(const std::vector<Tensor>& inputs);
  /// forward_inputs() under the compute-dtype override, as operator()(x) runs forward(); one
  /// input goes through operator()(x) itself (observers included). Observers see single-input
  /// calls only.
  Tensor operator()(const std::vector<Tensor>& inputs);
  /// Makes this module compute in `dtype` whatever the surrounding autocast region says:
  /// f32 turns autocast off inside it, bf16/f16 turn it on with that dtype. Used by precision
  /// policies to keep e.g. normalisation layers in f32.
  void set_compute_dtype(DType dtype) { compute_override_ = dtype; has_compute_override_ = true; }
  /// Makes operator() lay out a 4-D input [N, C, H, W] in `format` before forward(), so that a
  /// convnet converts once at its input and every layer after it keeps that layout
  /// (channels-last: the layout GPU convolutions run fastest in). Parameters and checkpoints are
  /// unchanged. Other inputs pass as they are.
  void set_input_memory_format(MemoryFormat format) {
    input_format_ = format;
    has_input_format_ = true;
  }
  /// True when operator()(x) would run exactly forward(x) now: no compute-dtype override, no
  /// forward observer on this thread (leaf modules), anomaly mode off. A parent may then fuse
  /// this module's op with a neighbour's (TransformerBlock's residual add and layer norm)
  /// without hiding the call from anything that watches or changes it.
  bool runs_plainly() const;
  /// Short type name, e.g. "Linear".
  virtual std::string type_name() const = 0;
  /// Dotted path from the root module, e.g. "features.3" ("" for the root); used by anomaly
  /// reports and diagnostics. Follows the parent that registered this module last; a child
  /// registered under "" has its parent's path.
  std::string path() const;

  /// Parameters of this module and its children, with dotted paths ("0.weight", "2.bias").
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  /// Buffers of this module and its children, with dotted paths.
  NamedTensors named_buffers() const;
  /// Parameters registered by this module itself (not its children), with their local names.
  const NamedTensors& local_parameters() const { return params_; }
  /// Direct children in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  /// Parameters and buffers by path: what a checkpoint stores.
  std::map<std::string, Tensor> state_dict() const;
  /// Copies values from state (casting to each tensor's dtype), after upgrade_state on a copy
  /// of it, so a state written before a layer changed its layout loads. strict: every key must
  /// match both ways; shapes must always match (ShapeError/ValueError naming the key otherwise).
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  /// Rewrites, in place, the entries of `state` that an older layout of this module tree wrote
  /// into today's layout, and returns what it merged (empty: nothing was old). `state` is keyed
  /// by "<parameter path>" or "<parameter path>.<suffix>" (a state dict; optimizer state such
  /// as "<path>.exp_avg"), so one call upgrades either. Each module does its own part
  /// (upgrade_own_state); ValueError naming the keys when an old layout is only partly there.
  std::vector<StateMerge> upgrade_state(std::map<std::string, Tensor>& state) const;

  /// Training mode (dropout active, batch statistics) for this module and all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Number of scalar parameters.
  std::int64_t parameter_count() const;

  /// The counters that seed the random draws of this module and its descendants (one per
  /// Dropout and per MultiHeadAttention: the number of masks drawn), depth first in
  /// registration order. Restoring it with set_random_state makes the next forward draw the
  /// same masks again: activation checkpointing replays a forward this way.
  std::vector<std::uint64_t> random_state() const;
  /// Restores what random_state() returned on this module tree. ValueError if the number of
  /// counters differs (the state comes from a different tree).
  void set_random_state(const std::vector<std::uint64_t>& state);

 protected:
  /// This module's part of upgrade_state: its entries are the keys starting with `prefix` (its
  /// path and a dot; "" for the root). Appends what it merged to `merges`. None by default.
  virtual void upgrade_own_state(std::map<std::string, Tensor>& state, const std::string& prefix,
                                 std::vector<StateMerge>& merges) const {
    (void)state, (void)prefix, (void)merges;
  }
  /// f(x) inside this module's compute-dtype override, as operator() runs forward(x) (without
  /// the forward observer): for a module's entries other than forward (Linear::forward_rows).
  Tensor run_in_compute_dtype(const Tensor& x, const std::function<Tensor(const Tensor&)>& f);
  /// Registers t as a trainable parameter (sets requires_grad, files it as a parameter).
  Tensor& register_parameter(const std::string& name, Tensor t);
  /// Registers t as a buffer (not trained, saved in the state dict).
  Tensor& register_buffer(const std::string& name, Tensor t);
  /// This module's own random counters, not its children's; none by default. Modules that draw
  /// random numbers from a counter override both this and set_own_random_state.
  virtual std::vector<std::uint64_t> own_random_state() const { return {}; }
  /// Takes back exactly own_random_state().size() counters.
  virtual void set_own_random_state(std::span<const std::uint64_t> state) { (void)state; }
  /// Registers a child module under name ("" makes it transparent in paths: see join_path).
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    children_.emplace_back(name, child);
    child->parent_ = this;
    child->name_in_parent_ = name;
    return child;
  }

 private:
  void collect(const std::string& prefix, bool params, NamedTensors& out) const;
  void upgrade_tree(std::map<std::string, Tensor>& state, const std::string& prefix,
                    std::vector<StateMerge>& merges) const;
  void collect_random_state(std::vector<std::uint64_t>& out) const;
  void restore_random_state(const std::vector<std::uint64_t>& state, std::size_t& pos);
  Tensor call_forward(const Tensor& x);

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  const Module* parent_ = nullptr;
  std::string name_in_parent_;
  bool training_ = true;
  bool has_compute_override_ = false;
  DType compute_override_ = DType::f32;
  bool has_input_format_ = false;
  MemoryFormat input_format_ = MemoryFormat::contiguous;
};

}  // namespace mixprec::nn
