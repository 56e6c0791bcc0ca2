// Learning-rate schedulers. Formulas are computed in double from the f32 hyper-parameters and
// rounded once to f32, so lr_at matches a double re-computation of PyTorch's closed forms.
#include "mixprec/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "mixprec/core/error.h"

namespace mixprec::optim {

// ---- LRScheduler ----

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, float base_lr)
    : name_(std::move(name)), optimizer_(&optimizer), base_lr_(base_lr) {
  state_.last_optimizer_steps = optimizer.steps();
  state_.base_lr = base_lr;
}

LRScheduler::~LRScheduler() = default;

void LRScheduler::check_step(std::int64_t t) const {
  MIXPREC_CHECK(t >= 0, ValueError, name_.c_str(), "lr_at: step " << t << " is negative");
}

void LRScheduler::apply_lr() { optimizer_->set_lr(lr_at(state_.step_count)); }

void LRScheduler::step() {
  const std::int64_t seen = optimizer_->steps();
  MIXPREC_CHECK(seen >= state_.last_optimizer_steps, StateError, name_.c_str(),
                "step: the optimizer has applied " << seen << " updates but this scheduler "
                    "already saw " << state_.last_optimizer_steps
                    << "; when restoring an optimizer state, load the scheduler state saved "
                       "with it (load_state)");
  // The point of this class: a step the GradScaler skipped (optimizer.steps() unchanged) does
  // not advance the schedule. Several updates between two calls still advance it by one, so a
  // per-epoch schedule stepped once per epoch keeps working.
  if (seen != state_.last_optimizer_steps) {
    const float lr = lr_at(state_.step_count + 1);  // may throw: change nothing before it
    ++state_.step_count;
    state_.last_optimizer_steps = seen;
    optimizer_->set_lr(lr);
    return;
  }
  apply_lr();
}

void LRScheduler::load_state(const LRSchedulerState& state) {
  MIXPREC_CHECK(state.step_count >= 0 && state.last_optimizer_steps >= 0, StateError,
                name_.c_str(),
                "load_state: negative counts (step_count " << state.step_count
                    << ", last_optimizer_steps " << state.last_optimizer_steps
                    << "); load a state saved by state()");
  MIXPREC_CHECK(state.base_lr == base_lr_, StateError, name_.c_str(),
                "load_state: the state was saved by a scheduler with base lr " << state.base_lr
                    << " but this one has " << base_lr_
                    << "; build the scheduler on the freshly built optimizer (before "
                       "optimizer.load_state) with the same settings");
  float lr = 0.0f;
  try {
    lr = lr_at(state.step_count);
  } catch (const ValueError& e) {
    throw StateError(name_, std::string("load_state: ") + e.what() +
                                "; load a state saved by a scheduler with the same settings");
  }
  optimizer_->set_lr(lr);
  state_.step_count = state.step_count;
  state_.last_optimizer_steps = state.last_optimizer_steps;
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, float gamma)
    : LRScheduler("StepLR", optimizer, optimizer.lr()), step_size_(step_size), gamma_(gamma) {
  MIXPREC_CHECK(step_size >= 1, ValueError, "StepLR",
                "step_size must be >= 1, got " << step_size);
  MIXPREC_CHECK(std::isfinite(gamma) && gamma > 0.0f, ValueError, "StepLR",
                "gamma must be finite and > 0, got " << gamma);
  apply_lr();
}

float StepLR::lr_at(std::int64_t t) const {
  check_step(t);
  return static_cast<float>(double{base_lr()} *
                            std::pow(gamma_, static_cast<double>(t / step_size_)));
}

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, float eta_min)
    : LRScheduler("CosineAnnealingLR", optimizer, optimizer.lr()), t_max_(t_max),
      eta_min_(eta_min) {
  MIXPREC_CHECK(t_max >= 1, ValueError, "CosineAnnealingLR", "t_max must be >= 1, got " << t_max);
  MIXPREC_CHECK(std::isfinite(eta_min) && eta_min >= 0.0f, ValueError, "CosineAnnealingLR",
                "eta_min must be finite and >= 0, got " << eta_min);
  apply_lr();
}

float CosineAnnealingLR::lr_at(std::int64_t t) const {
  check_step(t);
  const double phase = std::numbers::pi * static_cast<double>(t) / static_cast<double>(t_max_);
  return static_cast<float>(eta_min_ + (double{base_lr()} - eta_min_) * (1.0 + std::cos(phase)) / 2.0);
}

// ---- LinearWarmup ----

namespace {
/// The warm-up target: where the wrapped schedule starts, else the optimizer's lr.
float warmup_target(Optimizer& optimizer, const std::unique_ptr<LRScheduler>& after) {
  if (!after) return optimizer.lr();
  MIXPREC_CHECK(&after->optimizer() == &optimizer, ValueError, "LinearWarmup",
                "the wrapped " << after->name()
                               << " drives a different optimizer; build it on the same one");
  MIXPREC_CHECK(after->last_step() == 0, ValueError, "LinearWarmup",
                "the wrapped " << after->name() << " was already stepped " << after->last_step()
                               << " times; wrap a freshly built scheduler");
  return after->lr_at(0);
}
}  // namespace

LinearWarmup::LinearWarmup(Optimizer& optimizer, std::int64_t warmup_steps, float start_factor,
                           std::unique_ptr<LRScheduler> after)
    : LRScheduler("LinearWarmup", optimizer, warmup_target(optimizer, after)),
      warmup_steps_(warmup_steps), start_factor_(start_factor), after_(std::move(after)) {
  MIXPREC_CHECK(warmup_steps >= 1, ValueError, "LinearWarmup",
                "warmup_steps must be >= 1, got " << warmup_steps);
  MIXPREC_CHECK(start_factor > 0.0f && start_factor <= 1.0f, ValueError, "LinearWarmup",
                "start_factor must be in (0, 1], got " << start_factor);
  apply_lr();
}

float LinearWarmup::lr_at(std::int64_t t) const {
  check_step(t);
  if (t >= warmup_steps_) return after_ ? after_->lr_at(t - warmup_steps_) : base_lr();
  const double frac = static_cast<double>(t) / static_cast<double>(warmup_steps_);
  return static_cast<float>(double{base_lr()} * (start_factor_ + (1.0 - start_factor_) * frac));
}

// ---- OneCycleLR ----

namespace {
void check_positive(float v, const char* what) {
  MIXPREC_CHECK(std::isfinite(v) && v > 0.0f, ValueError, "OneCycleLR",
                what << " must be finite and > 0, got " << v);
}
double checked_initial(float max_lr, float div_factor) {
  check_positive(max_lr, "max_lr");
  check_positive(div_factor, "div_factor");
  return double{max_lr} / double{div_factor};
}
/// Cosine from start (pct 0) to end (pct 1).
double anneal_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, float max_lr, std::int64_t total_steps,
                       float pct_start, float div_factor, float final_div_factor)
    : LRScheduler("OneCycleLR", optimizer,
                  static_cast<float>(checked_initial(max_lr, div_factor))),
      max_lr_(max_lr), initial_lr_(checked_initial(max_lr, div_factor)),
      total_steps_(total_steps) {
  check_positive(final_div_factor, "final_div_factor");
  MIXPREC_CHECK(total_steps >= 1, ValueError, "OneCycleLR",
                "total_steps must be >= 1, got " << total_steps);
  MIXPREC_CHECK(pct_start >= 0.0f && pct_start <= 1.0f, ValueError, "OneCycleLR",
                "pct_start must be in [0, 1], got " << pct_start);
  min_lr_ = initial_lr_ / double{final_div_factor};
  peak_step_ = double{pct_start} * static_cast<double>(total_steps) - 1.0;
  apply_lr();
}

float OneCycleLR::lr_at(std::int64_t t) const {
  check_step(t);
  MIXPREC_CHECK(t <= total_steps_, ValueError, "OneCycleLR",
                "step " << t << " is beyond total_steps = " << total_steps_
                        << "; build the schedule with total_steps >= the number of updates");
  const double x = static_cast<double>(t);
  const double end = static_cast<double>(total_steps_ - 1);
  // PyTorch's phase walk: the rising phase while t <= peak, else the falling one. A phase of
  // zero length (tiny total_steps) yields its end value instead of PyTorch's division by zero.
  const bool rising = x <= peak_step_;
  const double start_step = rising ? 0.0 : peak_step_;
  const double span = (rising ? peak_step_ : end) - start_step;
  const double pct = span > 0.0 ? (x - start_step) / span : 1.0;
  return static_cast<float>(rising ? anneal_cos(initial_lr_, max_lr_, pct)
                                   : anneal_cos(max_lr_, min_lr_, pct));
}

}  // namespace mixprec::optim
