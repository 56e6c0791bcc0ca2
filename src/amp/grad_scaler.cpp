// GradScaler: per-optimizer state machine, the fused unscale, and the dynamic scale rule.
//
// The rule follows PyTorch's _amp_update_scale_ (overflow: scale *= backoff, growth tracker = 0;
// clean: tracker += 1 and at growth_interval scale *= growth unless that overflows f32, tracker
// = 0), with DeepSpeed's hysteresis folded in: an overflow first decrements a counter and backs
// off only when it reaches 0 (then the counter is restored). Clean iterations restore the counter
// like DeepSpeed's DynamicLossScaler: at each growth (consecutive_hysteresis = false, DeepSpeed's
// default) or at every clean iteration (consecutive_hysteresis = true). One difference from
// DeepSpeed: DeepSpeed leaves its counter at 1 after a backoff, so later overflows back off at
// once until the next growth; here it is restored, so each backoff takes `hysteresis` overflows.
// With hysteresis = 1 the counter plays no role and the rule is exactly PyTorch's.
//
// Predictive mode (ScalingMode::predictive, documented in the header) shares the overflow
// bookkeeping (skip, hysteresis, backoff) and replaces growth by a prediction from the amax the
// unscale pass measured.
#include "mixprec/amp/grad_scaler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/op_scope.h"
#include "kernels/unscale.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::amp {
namespace {

constexpr const char* kOp = "GradScaler";

/// The f16 maximum: the predictive rule keeps scaled gradients below it (divided by the margin).
constexpr double kF16Max = 65504.0;
/// extra_margin never grows beyond this (2^200): far past where every prediction is clamped to
/// the smallest scale, and far from double overflow.
const double kMaxExtraMargin = std::ldexp(1.0, 200);
/// predictive_history is at most this: a history is scanned at every update().
constexpr std::size_t kMaxPredictiveHistory = 1000000;

/// x rounded to the nearest f32 (the scale lives in f32, like PyTorch's f32 scale tensor).
double to_f32(double x) { return static_cast<double>(static_cast<float>(x)); }

void validate_options(const GradScalerOptions& o) {
  // Comparisons are written so that NaN fails them.
  MIXPREC_CHECK(o.growth_factor > 1.0 && std::isfinite(o.growth_factor), ValueError, kOp,
                "growth_factor must be finite and > 1, got " << o.growth_factor);
  MIXPREC_CHECK(o.backoff_factor > 0.0 && o.backoff_factor < 1.0, ValueError, kOp,
                "backoff_factor must be in (0, 1), got " << o.backoff_factor);
  MIXPREC_CHECK(o.growth_interval >= 1, ValueError, kOp,
                "growth_interval must be >= 1, got " << o.growth_interval);
  MIXPREC_CHECK(o.hysteresis >= 1, ValueError, kOp,
                "hysteresis must be >= 1 (1 backs off at every overflow), got " << o.hysteresis);
  MIXPREC_CHECK(o.min_scale >= 0.0 && std::isfinite(o.min_scale), ValueError, kOp,
                "min_scale must be finite and >= 0 (0 for no clamp), got " << o.min_scale);
  MIXPREC_CHECK(o.max_scale > 0.0, ValueError, kOp,
                "max_scale must be > 0 (infinity for no clamp), got " << o.max_scale);
  MIXPREC_CHECK(o.init_scale > 0.0 && std::isfinite(o.init_scale), ValueError, kOp,
                "init_scale must be finite and > 0, got " << o.init_scale);
  MIXPREC_CHECK(o.min_scale <= o.init_scale && o.init_scale <= o.max_scale, ValueError, kOp,
                "need min_scale <= init_scale <= max_scale, got "
                    << o.min_scale << " <= " << o.init_scale << " <= " << o.max_scale);
  MIXPREC_CHECK(o.init_scale >= FLT_MIN && o.init_scale <= FLT_MAX, ValueError, kOp,
                "init_scale " << o.init_scale << " is outside the normal f32 range [" << FLT_MIN
                              << ", " << FLT_MAX << "]; the scale is kept in f32");
  MIXPREC_CHECK(o.mode == ScalingMode::dynamic || o.mode == ScalingMode::predictive, ValueError,
                kOp, "mode must be ScalingMode::dynamic or ScalingMode::predictive");
  MIXPREC_CHECK(o.predictive_history >= 1 && o.predictive_history <= kMaxPredictiveHistory,
                ValueError, kOp,
                "predictive_history must be in [1, " << kMaxPredictiveHistory
                                                     << "] iterations, got "
                                                     << o.predictive_history);
  MIXPREC_CHECK(o.predictive_margin >= 1.0 && std::isfinite(o.predictive_margin), ValueError, kOp,
                "predictive_margin must be finite and >= 1 (1 lets the largest scaled gradient "
                "reach the f16 maximum 65504), got "
                    << o.predictive_margin);
}

/// The largest power of two s with s * amax <= target (amax > 0, target > 0, both finite and
/// s in the double range for every input this file passes).
double largest_power_of_two_below(double amax, double target) {
  int e = 0;
  (void)std::frexp(target / amax, &e);  // target / amax in [2^(e-1), 2^e)
  double s = std::ldexp(1.0, e - 1);
  // The quotient was rounded: if it rounded up onto a power of two, that one is too large. The
  // product of a power of two and amax is exact, so this test decides the question exactly. (A
  // quotient cannot round down below a power of two it exceeds: rounding is monotone.)
  while (s * amax > target) s *= 0.5;
  return s;
}

/// [lowest, highest]: the f32 values the dynamic rule may reach. The bounds are moved inwards to
/// f32 values, and to the normal f32 range so that 1/scale is always a finite f32.
std::pair<double, double> scale_bounds(const GradScalerOptions& o) {
  const double lo = std::max(o.min_scale, static_cast<double>(FLT_MIN));
  const double hi = std::min(o.max_scale, static_cast<double>(FLT_MAX));
  float lo_f = static_cast<float>(lo);
  if (static_cast<double>(lo_f) < lo) lo_f = std::nextafter(lo_f, FLT_MAX);
  float hi_f = static_cast<float>(hi);
  if (static_cast<double>(hi_f) > hi) hi_f = std::nextafter(hi_f, 0.0f);
  MIXPREC_CHECK(lo_f <= hi_f, ValueError, kOp,
                "no f32 value lies in [min_scale, max_scale] = ["
                    << o.min_scale << ", " << o.max_scale << "]; widen the range");
  return {lo_f, hi_f};
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  validate_options(options_);
  std::tie(lowest_, highest_) = scale_bounds(options_);
  scale_ = std::clamp(to_f32(options_.init_scale), lowest_, highest_);
  hysteresis_left_ = options_.hysteresis;
}

Tensor GradScaler::scale(const Tensor& loss) const {
  MIXPREC_CHECK(loss.defined(), ValueError, kOp,
                "scale: the loss is undefined; pass the loss tensor computed by the model");
  if (!options_.enabled) return loss;
  const Tensor loss32 = cast(loss, DType::f32);  // returns loss itself when already f32
  // affine, not mul: it is never rerouted to a lower precision by autocast, and x * s + 0 is
  // the single rounding of x * s. Its backward multiplies the seed gradient by the same f32 s.
  Tensor scaled = affine(loss32, static_cast<float>(scale_), 0.0f);
  scaled.impl().loss_scale = scale_;
  return scaled;
}

bool GradScaler::unscale_grads(optim::Optimizer& optimizer, float* amax) const {
  const std::vector<Tensor>& params = optimizer.params();
  // Check every gradient first, so an error leaves all of them as they were.
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    MIXPREC_CHECK(g.dtype() == DType::f32 || options_.allow_16bit_grads, DTypeError, kOp,
                  "unscale: gradient of parameter "
                      << i << " is " << name(g.dtype())
                      << "; master gradients must be fp32 (keep parameters fp32 and compute in "
                         "bf16 via autocast), or set allow_16bit_grads");
    // grad_scale 1 is what a hand-set gradient has: like PyTorch, it is taken to carry the
    // current scale. Any other value must be the current scale.
    const double gs = params[i].grad_scale();
    MIXPREC_CHECK(gs == 1.0 || gs == scale_, StateError, kOp,
                  "unscale: gradient of parameter "
                      << i << " was scaled by " << gs << " but the current scale is " << scale_
                      << "; the scale changed between backward() and unscale() (update() was "
                         "called in between): zero the gradients and redo the backward pass");
  }
  // inv is 1/scale computed in double and rounded once to f32. For an f32 scale the double
  // quotient is within 2^-53 relative, and rounding it to f32 (24 bits) gives the correctly
  // rounded f32 reciprocal (double rounding is innocuous for division since 53 >= 2*24 + 2), so
  // g * inv is within 1 f32 ulp of g / scale. For a power-of-two scale (the default 2^16, growth
  // 2, backoff 0.5 keep it one) inv is exactly 2^-k, a normal f32 since the scale is one, and
  // g * inv is exact unless it lands in the f32 subnormal range.
  const float inv = static_cast<float>(1.0 / scale_);
  // One found-inf flag and one amax for every parameter, in device memory next to the
  // gradients; the host reads both with one download (one synchronisation per step).
  Tensor verdict = Tensor::zeros({2}, DType::f32, MemoryCategory::workspace);
  float* found_inf = verdict.data<float>();
  float* device_amax = amax != nullptr ? found_inf + 1 : nullptr;
  // Multi-tensor calls (kernels::unscale_batch: 128 gradients per call, one launch on a GPU);
  // amax rides along in the same pass (no second read of the gradients).
  kernels::UnscaleBatch batch{};
  batch.inv = inv;
  batch.found_inf = found_inf;
  batch.amax = device_amax;
  std::vector<Tensor> in_batch;  // the gradients of the batch, kept alive until it runs
  const auto flush = [&] {
    if (batch.size > 0) kernels::unscale_batch(batch);
    for (const Tensor& g : in_batch) g.bump_version();
    batch.size = 0;
    in_batch.clear();
  };
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous()) {  // unscale a contiguous copy and make it the gradient
      g = g.contiguous();
      params[i].set_grad(g);
    }
    batch.runs[batch.size++] = {g.data_ptr(), g.dtype(),
                                static_cast<std::uint64_t>(g.numel())};
    in_batch.push_back(g);
    params[i].set_grad_scale(1.0);
    if (batch.size == kernels::kUnscaleBatchRuns) flush();
  }
  flush();
  const TransferReason why("found-inf");
  const std::vector<float> host = verdict.to_vector();
  if (amax != nullptr) *amax = std::max(*amax, host[1]);
  return host[0] != 0.0f;
}

void GradScaler::unscale(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  const auto it = per_optimizer_.find(&optimizer);
  if (it != per_optimizer_.end()) {
    MIXPREC_CHECK(it->second.phase != Phase::unscaled, StateError, kOp,
                  "unscale() has already been called on this optimizer since the last update(); "
                  "unscale once per iteration, between backward() and step()");
    MIXPREC_CHECK(it->second.phase != Phase::stepped, StateError, kOp,
                  "unscale() is being called after step() on this optimizer; unscale between "
                  "backward() and step(), or call update() to start a new iteration");
  }
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::optimizer, "unscale");
  float amax = 0.0f;
  const bool predictive = options_.mode == ScalingMode::predictive;
  // may throw: the phase stays ready
  const bool found = unscale_grads(optimizer, predictive ? &amax : nullptr);
  if (prof.active()) {
    double elements = 0, bytes = 0;  // one read and one write of every gradient
    for (const Tensor& p : optimizer.params()) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      elements += static_cast<double>(g.numel());
      bytes += 2.0 * static_cast<double>(g.nbytes());
    }
    runtime::detail::add_work(elements, bytes);
    prof.done_work(DType::f32);
  }
  PerOptimizer& entry = per_optimizer_[&optimizer];
  entry.phase = Phase::unscaled;
  entry.found_inf = found;
  entry.amax = amax;
}

void GradScaler::combine_across_processes(
    const optim::Optimizer& optimizer, const std::function<std::pair<bool, float>(bool, float)>& combine) {
  if (!options_.enabled) return;
  const auto it = per_optimizer_.find(&optimizer);
  MIXPREC_CHECK(it != per_optimizer_.end() && it->second.phase == Phase::unscaled, StateError, kOp,
                "combine_across_processes() needs an optimizer unscaled and not yet stepped in "
                "this iteration; call it between unscale() and step()");
  const auto [found, amax] = combine(it->second.found_inf, it->second.amax);
  it->second.found_inf = found;
  it->second.amax = amax;
}

bool GradScaler::step(optim::Optimizer& optimizer, const Tensor& grad_multiplier) {
  if (!options_.enabled) {
    optimizer.step(grad_multiplier);
    return true;
  }
  const auto it = per_optimizer_.find(&optimizer);
  const Phase phase = it == per_optimizer_.end() ? Phase::ready : it->second.phase;
  MIXPREC_CHECK(phase != Phase::stepped, StateError, kOp,
                "step() has already been called on this optimizer since the last update(); "
                "call update() once per iteration, after every optimizer's step()");
  if (phase == Phase::ready) unscale(optimizer);
  PerOptimizer& entry = per_optimizer_[&optimizer];
  if (entry.found_inf) {
    entry.phase = Phase::stepped;  // skipped: parameters and optimizer.steps() stay as they are
    return false;
  }
  optimizer.step(grad_multiplier);  // if it throws, the phase stays unscaled and step() may be retried
  entry.phase = Phase::stepped;
  return true;
}

void GradScaler::apply_dynamic_rule(bool found_inf) {
  if (found_inf) {
    growth_tracker_ = 0;
    if (--hysteresis_left_ == 0) {
      scale_ = std::clamp(to_f32(scale_ * options_.backoff_factor), lowest_, highest_);
      hysteresis_left_ = options_.hysteresis;
    }
    return;
  }
  if (options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
  if (++growth_tracker_ < options_.growth_interval) return;
  growth_tracker_ = 0;
  hysteresis_left_ = options_.hysteresis;  // DeepSpeed restores it at every growth
  const double grown = to_f32(scale_ * options_.growth_factor);
  // As PyTorch: a growth that would overflow f32 is dropped (the scale stays).
  if (std::isfinite(grown)) scale_ = std::clamp(grown, lowest_, highest_);
}

/// Backs off (subject to hysteresis) exactly as the dynamic rule does and remembers the scale
/// that overflowed; on a clean iteration keeps growth's cadence but spends it on halving
/// extra_margin, judges a pending overflow, and predicts the scale from the history.
void GradScaler::apply_predictive_rule(bool found_inf) {
  if (found_inf) {
    growth_tracker_ = 0;
    if (--hysteresis_left_ == 0) {
      pending_overflow_scale_ = scale_;
      scale_ = std::clamp(to_f32(scale_ * options_.backoff_factor), lowest_, highest_);
      hysteresis_left_ = options_.hysteresis;
    }
    return;
  }
  if (options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
  if (++growth_tracker_ >= options_.growth_interval) {
    growth_tracker_ = 0;
    hysteresis_left_ = options_.hysteresis;
    extra_margin_ = std::max(1.0, extra_margin_ * 0.5);
  }
  const double peak =
      amax_history_.empty() ? 0.0 : *std::max_element(amax_history_.begin(), amax_history_.end());
  if (peak == 0.0) return;  // only zero gradients so far: no information (the pending stays)
  const double target = kF16Max / options_.predictive_margin;
  // extra_margin is a power of two, so dividing the target by it moves the prediction by exactly
  // that factor.
  double s = largest_power_of_two_below(peak, target / extra_margin_);
  if (pending_overflow_scale_ > 0.0) {
    // The history (now with this clean iteration in it) would go back to a scale that overflowed:
    // what overflowed was not measured, so widen the margin until the prediction is below it.
    while (s >= pending_overflow_scale_ && extra_margin_ < kMaxExtraMargin) {
      extra_margin_ *= 2.0;
      s *= 0.5;
    }
    pending_overflow_scale_ = 0.0;
  }
  // Clamp to the powers of two inside [lowest_, highest_] when there are any (lowest_ >= FLT_MIN
  // and highest_ <= FLT_MAX, so both are in the normal f32 range), else to the range itself.
  int e = 0;
  const double m_lo = std::frexp(lowest_, &e);
  const double lo2 = m_lo == 0.5 ? lowest_ : std::ldexp(1.0, e);  // smallest 2^k >= lowest_
  (void)std::frexp(highest_, &e);
  const double hi2 = std::ldexp(1.0, e - 1);  // largest 2^k <= highest_
  s = lo2 <= hi2 ? std::clamp(s, lo2, hi2) : std::clamp(s, lowest_, highest_);
  scale_ = to_f32(s);  // exact: a power of two in the f32 range, or an f32 bound
}

void GradScaler::record_amax(double amax) {
  std::vector<double>& h = amax_history_;
  if (h.size() >= options_.predictive_history) {
    h.erase(h.begin(),
            h.begin() + static_cast<std::ptrdiff_t>(h.size() - options_.predictive_history + 1));
  }
  h.push_back(amax);
}

void GradScaler::record_history() {
  std::vector<double>& h = stats_.scale_history;
  if (options_.history_limit == 0) {
    h.clear();
    return;
  }
  if (h.size() >= options_.history_limit) {
    h.erase(h.begin(),
            h.begin() + static_cast<std::ptrdiff_t>(h.size() - options_.history_limit + 1));
  }
  h.push_back(get_scale());
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  bool checked = false;
  bool found_inf = false;
  float amax = 0.0f;
  for (const auto& entry : per_optimizer_) {
    if (entry.second.phase == Phase::ready) continue;
    checked = true;
    found_inf = found_inf || entry.second.found_inf;
    amax = std::max(amax, entry.second.amax);
  }
  const bool predictive = options_.mode == ScalingMode::predictive;
  // The history is fed before the rule runs, so this iteration's amax shapes the next scale; an
  // overflowing iteration's amax is not fed (it is not a complete measurement: the Inf/NaN
  // elements were left out of it).
  if (predictive && checked && !found_inf) record_amax(amax);
  if (new_scale) {
    const double v = *new_scale;
    MIXPREC_CHECK(v > 0.0 && std::isfinite(v), ValueError, kOp,
                  "update: new_scale must be finite and > 0, got " << v);
    const double rounded = to_f32(v);
    MIXPREC_CHECK(rounded >= FLT_MIN && std::isfinite(rounded), ValueError, kOp,
                  "update: new_scale " << v << " is outside the normal f32 range [" << FLT_MIN
                                       << ", " << FLT_MAX << "]; the scale is kept in f32");
    scale_ = rounded;
  } else {
    MIXPREC_CHECK(checked, StateError, kOp,
                  "update: no inf checks were recorded prior to update; call step() (or "
                  "unscale()) on each optimizer after the scaled backward pass, then update()");
    if (predictive) {
      apply_predictive_rule(found_inf);
    } else {
      apply_dynamic_rule(found_inf);
    }
  }
  if (checked) {
    if (found_inf) {
      ++stats_.skipped_steps;
      stats_.last_overflow_step = stats_.steps;
    }
    ++stats_.steps;
  }
  record_history();
  per_optimizer_.clear();  // every optimizer is ready for the next iteration
}

std::optional<bool> GradScaler::found_inf(const optim::Optimizer& optimizer) const {
  const auto it = per_optimizer_.find(&optimizer);
  if (it == per_optimizer_.end() || it->second.phase == Phase::ready) return std::nullopt;
  return it->second.found_inf;
}

GradScalerState GradScaler::state() const {
  return GradScalerState{options_,      scale_,        growth_tracker_, hysteresis_left_,
                         stats_,        amax_history_, extra_margin_,   pending_overflow_scale_};
}

void GradScaler::load_state(const GradScalerState& s) {
  for (const auto& entry : per_optimizer_) {
    MIXPREC_CHECK(
        entry.second.phase == Phase::ready, StateError, kOp,
        "load_state: an iteration is in progress (an optimizer was unscaled or stepped "
        "since the last update()); load the state before the iteration or after update()");
  }
  MIXPREC_CHECK(s.options.enabled == options_.enabled, StateError, kOp,
                "load_state: the state was saved by "
                    << (s.options.enabled ? "an enabled" : "a disabled")
                    << " GradScaler but this one is " << (options_.enabled ? "enabled" : "disabled")
                    << "; construct the scaler with the same `enabled` option");
  validate_options(s.options);
  const auto [lo, hi] = scale_bounds(s.options);
  MIXPREC_CHECK(s.scale > 0.0 && std::isfinite(s.scale), ValueError, kOp,
                "load_state: scale must be finite and > 0, got " << s.scale);
  MIXPREC_CHECK(s.growth_tracker >= 0 && s.growth_tracker < s.options.growth_interval, ValueError,
                kOp,
                "load_state: growth_tracker must be in [0, growth_interval = "
                    << s.options.growth_interval << "), got " << s.growth_tracker);
  MIXPREC_CHECK(
      s.hysteresis_left >= 1 && s.hysteresis_left <= s.options.hysteresis, ValueError, kOp,
      "load_state: hysteresis_left must be in [1, hysteresis = " << s.options.hysteresis
                                                                 << "], got " << s.hysteresis_left);
  const GradScalerStats& st = s.stats;
  MIXPREC_CHECK(st.steps >= 0 && st.skipped_steps >= 0 && st.skipped_steps <= st.steps &&
                    st.last_overflow_step >= -1 && st.last_overflow_step < st.steps &&
                    (st.skipped_steps == 0) == (st.last_overflow_step == -1),
                ValueError, kOp,
                "load_state: inconsistent stats (steps "
                    << st.steps << ", skipped_steps " << st.skipped_steps << ", last_overflow_step "
                    << st.last_overflow_step << "); pass a state saved by state() or to_json()");
  const bool predictive = s.options.mode == ScalingMode::predictive;
  MIXPREC_CHECK(s.amax_history.size() <= s.options.predictive_history &&
                    (predictive || s.amax_history.empty()),
                ValueError, kOp,
                "load_state: amax_history has " << s.amax_history.size()
                                                << " entries; it must be empty in dynamic mode and "
                                                   "hold at most predictive_history = "
                                                << s.options.predictive_history << " otherwise");
  for (const double a : s.amax_history) {
    MIXPREC_CHECK(a >= 0.0 && std::isfinite(a) && to_f32(a) == a, ValueError, kOp,
                  "load_state: amax_history entries must be finite f32 values >= 0, got " << a);
  }
  int exponent = 0;
  MIXPREC_CHECK(s.extra_margin >= 1.0 && s.extra_margin <= kMaxExtraMargin &&
                    std::frexp(s.extra_margin, &exponent) == 0.5 &&
                    (predictive || s.extra_margin == 1.0),
                ValueError, kOp,
                "load_state: extra_margin must be a power of two in [1, 2^200] (exactly 1 in "
                "dynamic mode), got "
                    << s.extra_margin);
  MIXPREC_CHECK(s.pending_overflow_scale == 0.0 ||
                    (predictive && s.pending_overflow_scale > 0.0 &&
                     std::isfinite(s.pending_overflow_scale)),
                ValueError, kOp,
                "load_state: pending_overflow_scale must be 0 (none), or finite and > 0 in "
                "predictive mode, got "
                    << s.pending_overflow_scale);
  options_ = s.options;
  lowest_ = lo;
  highest_ = hi;
  scale_ = std::clamp(to_f32(s.scale), lowest_, highest_);
  growth_tracker_ = s.growth_tracker;
  hysteresis_left_ = s.hysteresis_left;
  stats_ = st;
  amax_history_ = s.amax_history;
  extra_margin_ = s.extra_margin;
  pending_overflow_scale_ = s.pending_overflow_scale;
  std::vector<double>& h = stats_.scale_history;
  if (h.size() > options_.history_limit) {
    h.erase(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(h.size() - options_.history_limit));
  }
}

std::string GradScaler::to_json() const { return amp::to_json(state()); }

const char* name(ScalingMode mode) {
  switch (mode) {
    case ScalingMode::dynamic:
      return "dynamic";
    case ScalingMode::predictive:
      return "predictive";
  }
  return "unknown";
}

ScalingMode parse_scaling_mode(std::string_view text) {
  if (text == "dynamic") return ScalingMode::dynamic;
  if (text == "predictive") return ScalingMode::predictive;
  MIXPREC_CHECK(false, ValueError, "loss-scaling",
                "unknown loss-scaling mode '" << text << "'; choose dynamic or predictive");
  return ScalingMode::dynamic;  // unreachable
}

}  // namespace mixprec::amp
