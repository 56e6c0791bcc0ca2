#pragma once
/// Optimizer: the base of SGD, Adam and AdamW. Owns the parameter list, the fp32 master copies of
/// 16-bit parameters, the fp32 optimizer state, and a symmetric save/load of all of it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::kernels {
struct OptimArrays;
}  // namespace mixprec::kernels

namespace mixprec::optim {
class Optimizer;

/// One parameter that Optimizer::step() updates: what it hands the subclass's update().
struct ParamUpdate {
  std::size_t index;         ///< the parameter's position in params()
  Tensor grad;               ///< its gradient, contiguous and shape-checked
  std::int64_t param_step;   ///< the update this is for that parameter (1 for the first)
  std::size_t count;         ///< its elements
  std::uint64_t rng_stream;  ///< the stream of its stochastic rounding at this update
};

namespace detail {
kernels::OptimArrays optim_arrays(const Optimizer& opt, const ParamUpdate& u);
}  // namespace detail

/// How 16-bit (bf16/f16) parameters are updated; f32 parameters are always updated in place.
enum class MasterWeights {
  /// An fp32 master copy per 16-bit parameter (4 extra bytes per element) is updated, and the
  /// parameter becomes its round-to-nearest-even copy: tiny updates accumulate in the master.
  keep_fp32,
  /// No master: the update is computed in f32 from the 16-bit value and written back with
  /// stochastic rounding, which is unbiased, so tiny updates still move the parameter on average.
  none_stochastic_rounding,
};

/// Options every optimizer takes besides its hyper-parameters.
struct OptimizerOptions {
  MasterWeights master_weights = MasterWeights::keep_fp32;
  /// Seed of the counter-based RNG of stochastic rounding; parameter i's element j at that
  /// parameter's update t draws random_bits(mix(seed, t, i), j), so results are reproducible and
  /// independent of threading.
  std::uint64_t seed = 0;
};

/// A parameter group (PyTorch's param_groups): some of an optimizer's parameters with their own
/// hyper-parameters. lr_scale multiplies the optimizer's learning rate (so a schedule, which sets
/// that rate, moves every group alike); weight_decay replaces the optimizer's when given.
struct ParamGroup {
  std::string name;                   ///< e.g. "decay", "no_decay" (for logs and errors)
  std::vector<Tensor> params;         ///< each one of the optimizer's parameters
  float lr_scale = 1.0f;              ///< > 0 and finite
  std::optional<float> weight_decay;  ///< >= 0 and finite; nullopt: the optimizer's own
};

/// Named state for checkpoints. Tensors are handles to the live f32 state ("param.3.exp_avg",
/// "param.3.master"); scalars are exact in a double ("steps", "lr", "param.3.step").
struct OptimizerState {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<std::pair<std::string, double>> scalars;
};

/// Base optimizer: validates the parameters, keeps fp32 masters and state (allocated eagerly at
/// construction under MemoryCategory::optimizer_state), and runs one fused update per parameter.
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Applies one update to every parameter that has a gradient (others are left untouched and
  /// their per-parameter step count does not advance, as in PyTorch); bumps their versions.
  /// All gradients are validated (shape) before any parameter changes. The parameters are
  /// updated in multi-tensor kernel calls (kernels::adam_update_batch and sgd_update_batch:
  /// one launch per 48 parameters on a GPU, all threads over all parameters on a CPU).
  ///
  /// grad_multiplier: undefined, or a 0-d f32 tensor on the gradients' device whose value
  /// multiplies every gradient inside the update pass, rounded as a pass of its own would round
  /// it into the gradient (what clip_grad_norm_coefficient returns: the clipping coefficient,
  /// applied without a read and write of every gradient). The gradients are not changed.
  void step(const Tensor& grad_multiplier = Tensor());
  /// Clears every gradient (sets it undefined), so the next backward starts from nothing.
  void zero_grad();

  /// Learning rate used by the next step() (times each group's lr_scale).
  float lr() const noexcept { return lr_; }
  /// Puts the parameters into groups: every parameter in exactly one group (ValueError naming
  /// the first that is missing, repeated or not this optimizer's, or a bad lr_scale/weight_decay).
  /// Replaces any earlier grouping; the default is one group with the optimizer's options.
  /// The groups' hyper-parameters are part of the state (state_scalars: "group.<g>.lr_scale",
  /// "group.<g>.weight_decay", "param.<i>.group"), so a checkpoint restores them.
  void set_param_groups(const std::vector<ParamGroup>& groups);
  /// Number of groups (1 unless set_param_groups made more).
  std::size_t group_count() const noexcept { return group_lr_scale_.size(); }
  /// The group of parameter i.
  std::size_t group_of(std::size_t i) const { return param_group_.at(i); }
  /// Learning rate of parameter i in the next step: lr() times its group's lr_scale, in double.
  double param_lr(std::size_t i) const;
  /// Weight decay of parameter i: its group's, or `fallback` (the optimizer's own) if it has none.
  float param_weight_decay(std::size_t i, float fallback) const;
  /// Sets the learning rate (e.g. from a schedule); throws ValueError unless lr >= 0.
  void set_lr(float lr);
  /// The parameters, in the order given at construction (handles to the same tensors).
  const std::vector<Tensor>& params() const noexcept { return params_; }
  /// Number of step() calls that updated at least one parameter.
  std::int64_t steps() const noexcept { return steps_; }
  /// The bytes one step must move for parameter i at least: its gradient read (the parameter's
  /// size when it has none yet), its fp32 master and state buffers read and written, the
  /// parameter written (and read too when it has no master). What the profiler charges the
  /// update with, and the optimizer's share of a step's memory-bandwidth floor.
  std::size_t update_bytes(std::size_t i) const;
  /// update_bytes summed over every parameter.
  std::size_t step_bytes() const;
  /// Name used in error messages: "SGD", "Adam", "AdamW".
  const std::string& name() const noexcept { return name_; }
  /// Options given at construction.
  const OptimizerOptions& options() const noexcept { return options_; }
  /// fp32 master of parameter i (undefined for f32 parameters or without masters); ValueError
  /// if i is out of range.
  const Tensor& master(std::size_t i) const;

  /// Every state tensor with a stable name: "param.<i>.master" then "param.<i>.<buffer>" for
  /// each parameter i in order. Handles to the live tensors (clone them to snapshot).
  virtual std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  /// Scalar state: "steps", "lr" and "param.<i>.step" (updates applied to parameter i).
  virtual std::vector<std::pair<std::string, double>> state_scalars() const;
  /// state_tensors() and state_scalars() together.
  OptimizerState state() const { return {state_tensors(), state_scalars()}; }
  /// Restores a state saved by the same kind of optimizer over parameters of the same shapes and
  /// with the same options and hyper-parameters (configuration, e.g. the seed, is not state):
  /// copies the tensors' values into this optimizer's state and sets the scalars, so the next
  /// steps are bit-identical to those of the saved optimizer. A 16-bit parameter with a master is
  /// reset to the master's round-to-nearest-even copy (what it was when the state was saved), so
  /// the pair agrees even if only the optimizer state is restored. The names must match exactly; throws StateError
  /// (missing/extra/ill-shaped entries, bad scalars) before changing anything.
  virtual void load_state(const OptimizerState& state);

 protected:
  /// Validates params (non-empty, each defined, a leaf requiring grad, contiguous, no two sharing
  /// storage) and lr; creates the fp32 masters. `name` prefixes every error message.
  Optimizer(std::string name, std::vector<Tensor> params, float lr, OptimizerOptions options);

  /// Updates every listed parameter (their arrays: detail::optim_arrays; batched kernel calls:
  /// optim/batched_update.h) and bumps the versions of the optimizer's own state. Called by
  /// step(), which bumps the parameters' and masters' versions afterwards.
  virtual void update(const std::vector<ParamUpdate>& updates) = 0;

  /// A zero-filled f32 state tensor for parameter i, shaped like it, filed under optimizer_state
  /// and listed by state_tensors() as "param.<i>.<buffer>" (load_state writes into it in place).
  Tensor add_state(std::size_t i, const std::string& buffer);
  /// The RNG stream of stochastic rounding for parameter i at its update `param_step`.
  std::uint64_t rng_stream(std::size_t i, std::int64_t param_step) const noexcept;
  /// Number of elements of parameter i.
  std::size_t numel(std::size_t i) const;

 private:
  std::string name_;
  std::vector<Tensor> params_;
  float lr_;
  OptimizerOptions options_;
  std::vector<Tensor> masters_;                                          ///< per param
  std::vector<std::vector<std::pair<std::string, Tensor>>> buffers_;     ///< per param
  std::vector<std::int64_t> param_steps_;                                ///< per param
  std::int64_t steps_ = 0;
  std::vector<std::size_t> param_group_;    ///< per param: its group
  std::vector<double> group_lr_scale_{1.0};  ///< per group
  std::vector<double> group_weight_decay_{-1.0};  ///< per group; < 0: the optimizer's own
  // Per parameter, during step(): the 16-bit weight copy (runtime::WeightCopies,
  // mixprec/runtime/weight_copies.h: the store lent to this thread) that its update may write in
  // its pass, and whether the update took it (optim_arrays sets it); step() then marks the copy
  // current at the parameter's new version.
  std::vector<Tensor> pending_copies_;
  mutable std::vector<char> pending_copy_taken_;
  Tensor grad_multiplier_;  ///< step()'s argument while it runs
  friend kernels::OptimArrays detail::optim_arrays(const Optimizer&, const ParamUpdate&);
};

}  // namespace mixprec::optim
