#pragma once
/// GradScaler: dynamic loss scaling with torch.amp.GradScaler's semantics (scale the loss, unscale
/// the gradients in one fused pass that also looks for Inf/NaN, skip the optimizer step of an
/// overflowing iteration, back off / grow the scale), plus DeepSpeed-style hysteresis, clamps,
/// statistics, a save/load of its state (also as JSON), and a predictive mode that sets the scale
/// from the measured magnitude of recent gradients instead of probing for overflows.
///
/// Typical iteration (one or more optimizers sharing one scaler):
///   scaler.scale(loss).backward();
///   scaler.unscale(opt);          // optional: only to look at / clip the true gradients
///   scaler.step(opt);             // skipped (returns false) if opt's gradients had Inf/NaN
///   scaler.update();              // once per iteration, after every step()
///
/// The scale is kept as an f32 value (PyTorch keeps it in an f32 tensor): every new scale is
/// computed in double and rounded to f32, so the loss is multiplied by exactly get_scale().
/// Optimizers are tracked by address during an iteration (cleared by update()), so an optimizer
/// must outlive the iteration it takes part in. Not thread-safe: use one scaler from one thread.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::optim {
class Optimizer;
}

namespace mixprec::amp {

/// How GradScaler::update() chooses the next scale.
///
/// dynamic (PyTorch's rule) finds the largest safe scale by trial: it grows the scale after
/// growth_interval clean iterations and backs off when a step overflows, so in steady state one
/// step in every growth_interval or so is an overflow, skipped on purpose.
///
/// predictive measures instead: the fused unscale pass also takes the amax (largest finite
/// |unscaled gradient|) of the optimizer's parameter gradients, update() keeps the amax of the last
/// predictive_history clean iterations, and the next scale is the largest power of two s with
/// s * max(history) <= 65504 / (predictive_margin * extra_margin) (65504 = the f16 maximum),
/// clamped to [min_scale, max_scale] (to the powers of two inside it, if any). A power-of-two scale
/// makes the unscale exact.
///
/// Why parameter-gradient amax is only a proxy. What overflows in an f16 backward pass are the
/// f16 tensors inside it: mainly the activation gradients dX handed from layer to layer (f16
/// GEMM/conv outputs under autocast) and the f16 intermediates of elementwise backward ops. None
/// of them reach the unscale; the parameter gradients do (in f32: an autocast layer's weight
/// gradient comes straight from the GEMM's f32 accumulator), so their amax costs nothing. Both
/// are products of the same upstream gradient dY (dW = dY^T X, dX = dY W), so they grow and
/// shrink together, but their ratio depends on the activations, the weights and the batch size,
/// and next iteration's gradients are not the history's. predictive_margin is the headroom for
/// both: by default 2^3, so the largest scaled parameter gradient is at most 65504 / 8 = 8188 and
/// unmeasured values may be 8 times larger before they overflow. A margin costs range at the
/// small end (an f16 value below 2^-24 flushes to zero), so it should stay small; when the proxy
/// over-estimates (a large batch makes dW much larger than dX), the scale is simply lower than
/// it could be.
///
/// Overflows. The step is skipped as always, the scale backs off (scale *= backoff_factor, with
/// the same hysteresis as dynamic), nothing is added to the history (no Inf), and the scale that
/// overflowed is kept as pending_overflow_scale. The next clean iteration decides what the
/// overflow meant: if its prediction (with the new amax in the history) is below the scale that
/// overflowed, the gradients simply grew and the history now knows it; if the prediction would go
/// back to that scale or above, the proxy under-estimated, and extra_margin (a power of two, 1 at
/// first) is doubled until the prediction is below it. extra_margin is halved again (never below 1)
/// after every growth_interval consecutive clean iterations, so like dynamic scaling this probes
/// the larger scale once per growth_interval, but only when an overflow showed the proxy to be
/// short. Iterations whose gradients are all zero carry no information and leave the scale alone.
enum class ScalingMode {
  dynamic,     ///< grow / back off by trial (PyTorch); the default
  predictive,  ///< the largest power of two that keeps the recent gradient amax below a target
};

/// "dynamic" or "predictive".
const char* name(ScalingMode mode);
/// Parses the names above; ValueError listing them otherwise.
ScalingMode parse_scaling_mode(std::string_view text);

/// Construction options; GradScaler validates them (ValueError "GradScaler: ...").
struct GradScalerOptions {
  double init_scale = 65536.0;  ///< > 0, within [min_scale, max_scale]
  double growth_factor = 2.0;   ///< > 1: scale *= growth_factor after growth_interval clean steps
  double backoff_factor = 0.5;  ///< in (0, 1): scale *= backoff_factor on overflow
  std::int64_t growth_interval = 2000;  ///< >= 1 consecutive clean iterations before growing
  bool enabled = true;                  ///< false: every call is a pass-through
  /// >= 1: back off only at the hysteresis-th overflowing iteration counted since the counter
  /// was last restored (1 = PyTorch: every overflow backs off). See consecutive_hysteresis.
  int hysteresis = 1;
  /// Which clean iterations restore the hysteresis counter. false (DeepSpeed's default): only a
  /// growth of the scale does, so overflows separated by clean iterations still add up; true:
  /// every clean iteration does, so only consecutive overflows add up.
  bool consecutive_hysteresis = false;
  double min_scale = 0.0;  ///< >= 0: the scale never backs off below it (0: no clamp)
  double max_scale = std::numeric_limits<double>::infinity();  ///< the scale never grows above it
  /// Accept bf16/f16 gradients in unscale() (unscaled in their own dtype); by default they are an
  /// error because fp32 master gradients are the supported recipe.
  bool allow_16bit_grads = false;
  std::size_t history_limit = 10000;  ///< entries kept in GradScalerStats::scale_history
  /// How update() chooses the next scale (see ScalingMode). The options below are used only by
  /// predictive mode (and validated in both).
  ScalingMode mode = ScalingMode::dynamic;
  /// In [1, 1000000]: clean iterations whose gradient amax the predictive rule remembers; the next
  /// scale is chosen for the largest of them, so a spike is remembered this many iterations.
  std::size_t predictive_history = 16;
  /// Finite and >= 1: the predictive rule keeps scale * amax <= 65504 / predictive_margin, so
  /// gradients the unscale does not measure may be this much larger than the measured ones.
  double predictive_margin = 8.0;
};

/// Counters of a scaler's life; an "iteration" is an update() that followed at least one inf
/// check (unscale() or step()) on some optimizer.
struct GradScalerStats {
  std::int64_t steps = 0;                ///< iterations completed
  std::int64_t skipped_steps = 0;        ///< iterations in which some optimizer found Inf/NaN
  std::int64_t last_overflow_step = -1;  ///< 0-based index of the last such iteration; -1 if none
  /// get_scale() after each update() (explicit new scales included), oldest first; only the last
  /// history_limit entries are kept.
  std::vector<double> scale_history;
};

/// Everything a scaler needs to resume exactly where it was (between iterations).
struct GradScalerState {
  GradScalerOptions options;
  double scale = 65536.0;
  std::int64_t growth_tracker = 0;  ///< clean iterations since the last growth or overflow
  int hysteresis_left = 1;          ///< overflows still tolerated before the next backoff
  GradScalerStats stats;
  /// Predictive mode: the amax (largest finite |unscaled gradient|, an f32 value, >= 0) of each of
  /// the last clean iterations, oldest first, at most options.predictive_history entries. Always
  /// empty in dynamic mode.
  std::vector<double> amax_history;
  /// Predictive mode: a power of two in [1, 2^200], how far overflows the prediction missed have
  /// widened the margin; 1 in dynamic mode. See ScalingMode.
  double extra_margin = 1.0;
  /// Predictive mode: the scale of the last overflow that caused a backoff, until a clean
  /// iteration has compared it with a new prediction; 0 when none is pending (always in dynamic).
  double pending_overflow_scale = 0.0;
};

/// Serialises a state as one JSON object (format version 2); doubles are printed with 17
/// significant digits (and Inf/NaN as the strings "inf", "-inf", "nan"), so from_json gives back
/// identical bits.
std::string to_json(const GradScalerState& state);

/// Loss scaler shared by any number of optimizers (one scale for all of them), dynamic or
/// predictive (options.mode).
class GradScaler {
 public:
  /// Throws ValueError ("GradScaler: ...") on invalid options.
  explicit GradScaler(GradScalerOptions options = {});

  /// loss (cast to f32 if 16-bit) times get_scale(), differentiable; the result's
  /// impl().loss_scale records the factor, so backward() from it tags every leaf's grad_scale.
  /// Disabled: returns loss itself. Any shape; ValueError if loss is undefined.
  Tensor scale(const Tensor& loss) const;

  /// Multiplies every defined gradient of optimizer's parameters in place by 1/scale in one fused
  /// pass that also records whether any of them holds Inf/NaN (and, in predictive mode, the amax
  /// of the unscaled gradients); sets their grad_scale to 1.
  /// DTypeError on a bf16/f16 gradient unless allow_16bit_grads; StateError if called twice for
  /// this optimizer before update(), after step(), or if a gradient was scaled by another scale.
  /// All gradients are checked before any is changed. Disabled: does nothing.
  void unscale(optim::Optimizer& optimizer);

  /// For an optimizer whose parameters are split across processes (a sharded optimizer, ZeRO):
  /// after unscale(optimizer), passes this process's found_inf and amax (predictive mode; 0
  /// otherwise) for it to `combine`, which returns the whole job's (Inf/NaN found anywhere, the
  /// largest amax), and records those, so that every process skips the same steps and chooses
  /// the same scale (what PyTorch's ShardedGradScaler does with an all-reduce). Disabled: does
  /// nothing and does not call combine. StateError unless the optimizer was unscaled and not yet
  /// stepped in this iteration.
  void combine_across_processes(const optim::Optimizer& optimizer,
                                const std::function<std::pair<bool, float>(bool, float)>& combine);

  /// Unscales the optimizer's gradients if unscale() was not called this iteration, then calls
  /// optimizer.step(grad_multiplier) unless they held Inf/NaN (grad_multiplier: the clipping
  /// coefficient, or undefined; see Optimizer::step). Returns whether the step ran. StateError
  /// if called twice for this optimizer before update(). Disabled: steps and returns true.
  bool step(optim::Optimizer& optimizer, const Tensor& grad_multiplier = Tensor());

  /// Ends the iteration: with no argument, applies the mode's rule (dynamic: backoff if any
  /// optimizer found Inf/NaN this iteration, subject to hysteresis; growth after growth_interval
  /// clean iterations; clamped to [min_scale, max_scale]; predictive: see ScalingMode) and throws
  /// StateError if no optimizer was unscaled or stepped since the last update(). With new_scale
  /// (> 0, finite, a normal f32 after rounding, else ValueError), sets the scale to it instead,
  /// unclamped, leaving the growth and hysteresis counters and the predictive extra_margin and
  /// pending overflow as they are (as PyTorch does); a clean iteration's amax still enters the
  /// predictive history (it is a measurement, not a decision). Then every optimizer is ready for
  /// a new iteration. Disabled: does nothing.
  void update(std::optional<double> new_scale = {});

  /// Current scale (an f32 value); 1 when disabled.
  double get_scale() const noexcept { return options_.enabled ? scale_ : 1.0; }
  bool is_enabled() const noexcept { return options_.enabled; }
  /// Clean iterations since the last growth or overflow.
  std::int64_t growth_tracker() const noexcept { return growth_tracker_; }
  /// Overflowing iterations still tolerated before the next backoff (hysteresis when restored).
  int hysteresis_left() const noexcept { return hysteresis_left_; }
  const GradScalerOptions& options() const noexcept { return options_; }
  const GradScalerStats& stats() const noexcept { return stats_; }
  /// Predictive mode: amax of the last clean iterations, oldest first (GradScalerState).
  const std::vector<double>& amax_history() const noexcept { return amax_history_; }
  /// Predictive mode: the margin widening left by unpredicted overflows (1 = none).
  double extra_margin() const noexcept { return extra_margin_; }
  /// Whether this iteration's inf check of optimizer found Inf/NaN; nullopt if it has not been
  /// unscaled or stepped since the last update().
  std::optional<bool> found_inf(const optim::Optimizer& optimizer) const;

  /// The state as of now (an iteration in progress is not part of it).
  GradScalerState state() const;
  /// Restores a state (options included), validating it like the constructor (ValueError).
  /// StateError if an iteration is in progress (an optimizer unscaled or stepped since the last
  /// update()) or if the state's `enabled` differs from this scaler's.
  void load_state(const GradScalerState& state);
  /// to_json(state()).
  std::string to_json() const;
  /// Parses what to_json wrote; ValueError on malformed JSON, unknown or missing keys, or an
  /// invalid state. Version-1 text (written before predictive mode existed, without its keys) is
  /// accepted and gives a dynamic-mode state with default predictive options.
  static GradScalerState from_json(std::string_view json);

 private:
  enum class Phase { ready, unscaled, stepped };
  struct PerOptimizer {
    Phase phase = Phase::ready;
    bool found_inf = false;
    float amax = 0.0f;  ///< predictive mode: largest finite |unscaled gradient| (0 otherwise)
  };

  /// Unscales; returns found_inf, and raises *amax when it is not null.
  bool unscale_grads(optim::Optimizer& optimizer, float* amax) const;
  void apply_dynamic_rule(bool found_inf);
  void apply_predictive_rule(bool found_inf);
  void record_amax(double amax);
  void record_history();

  GradScalerOptions options_;
  double scale_ = 1.0;
  double lowest_ = 0.0;   ///< smallest allowed scale: max(min_scale, FLT_MIN) rounded up to f32
  double highest_ = 0.0;  ///< largest allowed scale: min(max_scale, FLT_MAX) rounded down to f32
  std::int64_t growth_tracker_ = 0;
  int hysteresis_left_ = 1;
  GradScalerStats stats_;
  std::vector<double> amax_history_;   ///< see GradScalerState::amax_history
  double extra_margin_ = 1.0;          ///< see GradScalerState::extra_margin
  double pending_overflow_scale_ = 0;  ///< see GradScalerState::pending_overflow_scale
  /// This iteration's progress per optimizer, keyed by address (cleared by update()).
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace mixprec::amp
