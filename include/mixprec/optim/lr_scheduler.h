#pragma once
/// Learning-rate schedules that follow the optimizer's APPLIED updates. step() advances the
/// schedule only if the optimizer applied an update since the previous scheduler step: when the
/// GradScaler skips a step (inf/NaN gradients), optimizer.steps() does not move, so neither does
/// the schedule. Without this, every overflow at the start of fp16 training (the loss scale
/// searching downward) would silently eat warm-up steps. Each schedule is a pure function
/// lr_at(t) of the scheduler's own step count t, with PyTorch's closed-form formulas.
#include <cstdint>
#include <memory>
#include <string>

#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

/// What a scheduler must save to resume: its step count and the optimizer.steps() it last saw;
/// base_lr is saved only to catch a scheduler built with a different base on load.
struct LRSchedulerState {
  std::int64_t step_count = 0;
  std::int64_t last_optimizer_steps = 0;
  float base_lr = 0.0f;
};

/// Base of the schedulers: bound to one Optimizer (which must outlive it), whose lr() at
/// construction is the schedule's base learning rate (OneCycleLR sets its own). Construction sets
/// the optimizer's lr to lr_at(0), like PyTorch.
class LRScheduler {
 public:
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Call once per training iteration after optimizer.step() (or scaler.step(optimizer)).
  /// If optimizer.steps() changed since the previous call (or construction), the step count
  /// advances by one; if it did not (a skipped update), the schedule stays where it is. Then sets
  /// optimizer.set_lr(lr_at(last_step())). Throws StateError if optimizer.steps() went backwards
  /// (an optimizer state was loaded without the matching scheduler state).
  void step();
  /// The learning rate of step t (t >= 0) of this schedule; pure, throws ValueError if t < 0 or
  /// t is outside the schedule (OneCycleLR beyond total_steps).
  virtual float lr_at(std::int64_t t) const = 0;
  /// Number of times the schedule advanced (0 after construction).
  std::int64_t last_step() const noexcept { return state_.step_count; }
  /// The learning rate this schedule scales (optimizer.lr() at construction).
  float base_lr() const noexcept { return base_lr_; }
  /// Class name used as the prefix of error messages, e.g. "StepLR".
  const std::string& name() const noexcept { return name_; }
  /// The optimizer this scheduler drives.
  Optimizer& optimizer() const noexcept { return *optimizer_; }

  /// The state to checkpoint alongside the optimizer's.
  LRSchedulerState state() const noexcept { return state_; }
  /// Restores a saved state and sets the optimizer's lr to lr_at(step_count); throws StateError
  /// (changing nothing) on negative counts, a step outside the schedule, or a base_lr differing
  /// from this scheduler's. To resume: build the optimizer and the scheduler as at the start
  /// (the scheduler reads its base lr from the fresh optimizer), then load both states; a
  /// scheduler built after optimizer.load_state() would take the saved current lr as its base,
  /// which the base_lr check reports.
  void load_state(const LRSchedulerState& state);

 protected:
  /// Binds to optimizer; `name` prefixes error messages; base_lr is what the schedule scales.
  LRScheduler(std::string name, Optimizer& optimizer, float base_lr);
  /// Sets optimizer.lr to lr_at(last_step()); concrete constructors call it last (lr_at is
  /// virtual, so the base constructor cannot).
  void apply_lr();
  /// Throws ValueError("<name>: ...") unless t >= 0.
  void check_step(std::int64_t t) const;

 private:
  std::string name_;
  Optimizer* optimizer_;
  float base_lr_;
  LRSchedulerState state_;
};

/// lr = base_lr * gamma^floor(t / step_size) (torch.optim.lr_scheduler.StepLR).
class StepLR : public LRScheduler {
 public:
  /// Throws ValueError unless step_size >= 1 and gamma is finite and > 0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, float gamma = 0.1f);
  float lr_at(std::int64_t t) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / t_max)) / 2 (PyTorch's closed form;
/// like it, the curve rises again past t_max, so stop stepping or choose t_max = run length).
class CosineAnnealingLR : public LRScheduler {
 public:
  /// Throws ValueError unless t_max >= 1 and eta_min is finite and >= 0.
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, float eta_min = 0.0f);
  float lr_at(std::int64_t t) const override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// Linear warm-up from start_factor * target to target over warmup_steps steps, then the wrapped
/// schedule (if any) from its step 0: lr_at(t) = target * (start_factor + (1 - start_factor) *
/// t / warmup_steps) for t < warmup_steps, then after->lr_at(t - warmup_steps) (or target). The
/// target is after->lr_at(0) when wrapping (the wrapped schedule's base lr for StepLR/Cosine),
/// else optimizer.lr() at construction. Equals SequentialLR([LinearLR(start_factor, 1.0,
/// total_iters=warmup_steps), after], milestones=[warmup_steps]).
class LinearWarmup : public LRScheduler {
 public:
  /// Takes ownership of `after`, which must be bound to the same optimizer and never stepped
  /// (ValueError otherwise, as for warmup_steps < 1 or start_factor outside (0, 1]). Construct
  /// `after` first, on the optimizer with the intended base lr.
  LinearWarmup(Optimizer& optimizer, std::int64_t warmup_steps, float start_factor = 1.0f / 3.0f,
               std::unique_ptr<LRScheduler> after = nullptr);
  float lr_at(std::int64_t t) const override;
  /// The wrapped schedule (null when none).
  const LRScheduler* after() const noexcept { return after_.get(); }

 private:
  std::int64_t warmup_steps_;
  double start_factor_;
  std::unique_ptr<LRScheduler> after_;
};

/// The 1cycle policy with cosine annealing (torch.optim.lr_scheduler.OneCycleLR, two phases,
/// no momentum cycling): from initial = max_lr / div_factor up to max_lr at step
/// pct_start * total_steps - 1, then down to initial / final_div_factor at step total_steps - 1.
/// In each phase lr = end + (start - end) * (1 + cos(pi * pct)) / 2 with pct the fraction of the
/// phase done. The optimizer's lr at construction is ignored (base_lr() is initial).
class OneCycleLR : public LRScheduler {
 public:
  /// Throws ValueError unless max_lr, div_factor and final_div_factor are finite and > 0,
  /// total_steps >= 1 and pct_start is in [0, 1].
  OneCycleLR(Optimizer& optimizer, float max_lr, std::int64_t total_steps, float pct_start = 0.3f,
             float div_factor = 25.0f, float final_div_factor = 1e4f);
  /// Throws ValueError for t > total_steps, as PyTorch does when stepped too often.
  float lr_at(std::int64_t t) const override;

 private:
  double max_lr_, initial_lr_, min_lr_;
  std::int64_t total_steps_;
  double peak_step_;  ///< end of the rising phase: pct_start * total_steps - 1 (as PyTorch)
};

}  // namespace mixprec::optim
