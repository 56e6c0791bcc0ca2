#pragma once
/// GradScaler: dynamic loss scaling with torch.amp.GradScaler's semantics (scale the loss, unscale
/// the gradients in one fused pass that also looks for Inf/NaN, skip the optimizer step of an
/// overflowing iteration, back off / grow the scale), plus DeepSpeed-style hysteresis, clamps,
/// statistics, and a save/load of its state (also as JSON).
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
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::optim {
class Optimizer;
}

namespace mixprec::amp {

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
};

/// Serialises a state as one JSON object; doubles are printed with 17 significant digits (and
/// Inf/NaN as the strings "inf", "-inf", "nan"), so from_json gives back identical bits.
std::string to_json(const GradScalerState& state);

/// Dynamic loss scaler shared by any number of optimizers (one scale for all of them).
class GradScaler {
 public:
  /// Throws ValueError ("GradScaler: ...") on invalid options.
  explicit GradScaler(GradScalerOptions options = {});

  /// loss (cast to f32 if 16-bit) times get_scale(), differentiable; the result's
  /// impl().loss_scale records the factor, so backward() from it tags every leaf's grad_scale.
  /// Disabled: returns loss itself. Any shape; ValueError if loss is undefined.
  Tensor scale(const Tensor& loss) const;

  /// Multiplies every defined gradient of optimizer's parameters in place by 1/scale in one fused
  /// pass that also records whether any of them holds Inf/NaN; sets their grad_scale to 1.
  /// DTypeError on a bf16/f16 gradient unless allow_16bit_grads; StateError if called twice for
  /// this optimizer before update(), after step(), or if a gradient was scaled by another scale.
  /// All gradients are checked before any is changed. Disabled: does nothing.
  void unscale(optim::Optimizer& optimizer);

  /// Unscales the optimizer's gradients if unscale() was not called this iteration, then calls
  /// optimizer.step() unless they held Inf/NaN. Returns whether the step ran. StateError if
  /// called twice for this optimizer before update(). Disabled: steps and returns true.
  bool step(optim::Optimizer& optimizer);

  /// Ends the iteration: with no argument, applies the dynamic rule (backoff if any optimizer
  /// found Inf/NaN this iteration, subject to hysteresis; growth after growth_interval clean
  /// iterations; clamped to [min_scale, max_scale]) and throws StateError if no optimizer was
  /// unscaled or stepped since the last update(). With new_scale (> 0, finite, a normal f32 after
  /// rounding, else ValueError), sets the scale to it instead, unclamped, leaving the growth and
  /// hysteresis counters as they are (as PyTorch does). Then every optimizer is ready for a new
  /// iteration. Disabled: does nothing.
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
  /// invalid state.
  static GradScalerState from_json(std::string_view json);

 private:
  enum class Phase { ready, unscaled, stepped };
  struct PerOptimizer {
    Phase phase = Phase::ready;
    bool found_inf = false;
  };

  bool unscale_grads(optim::Optimizer& optimizer) const;
  void apply_dynamic_rule(bool found_inf);
  void record_history();

  GradScalerOptions options_;
  double scale_ = 1.0;
  double lowest_ = 0.0;   ///< smallest allowed scale: max(min_scale, FLT_MIN) rounded up to f32
  double highest_ = 0.0;  ///< largest allowed scale: min(max_scale, FLT_MAX) rounded down to f32
  std::int64_t growth_tracker_ = 0;
  int hysteresis_left_ = 1;
  GradScalerStats stats_;
  /// This iteration's progress per optimizer, keyed by address (cleared by update()).
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace mixprec::amp
