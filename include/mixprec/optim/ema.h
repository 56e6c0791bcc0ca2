#pragma once
/// Exponential moving average of a model's weights, kept in f32 whatever the parameters' dtype:
/// with decay 0.999 each update moves the average by 0.1% of the gap, far below a bf16 ulp
/// (0.4%), so a bf16 average would stop moving. Use it to evaluate with smoothed weights.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::optim {

/// Parameters by name, e.g. nn::Module::named_parameters().
using NamedParams = std::vector<std::pair<std::string, Tensor>>;

/// What an EMA saves: the shadows (handles to the live f32 tensors; clone them to snapshot) and
/// the number of updates done (which drives the warm-up).
struct EmaState {
  std::vector<std::pair<std::string, Tensor>> shadows;
  std::int64_t num_updates = 0;
};

/// EMA of named parameters (f32, bf16 or f16; contiguous). Each shadow is an f32 tensor filed as
/// MemoryCategory::optimizer_state, initialised to its parameter's value. The parameters are the
/// tensors given at construction (handles: in-place optimizer updates are seen by update()).
class EMA {
 public:
  /// Throws ValueError ("EMA: ...") on an empty list, an undefined or non-contiguous tensor, a
  /// repeated name, or decay outside (0, 1). With warmup, update t (0 for the first) uses
  /// min(decay, (1 + t) / (10 + t)), as TensorFlow's ExponentialMovingAverage with num_updates.
  EMA(NamedParams params, float decay, bool warmup = false);
  EMA(const EMA&) = delete;
  EMA& operator=(const EMA&) = delete;

  /// One fused pass per tensor: shadow = decay_t * shadow + (1 - decay_t) * param, computed in
  /// f32 as shadow + (1 - decay_t) * (param - shadow) (the same value, but a shadow equal to its
  /// parameter stays exactly equal). Call after each optimizer step.
  void update();
  /// The decay the next update() uses.
  float current_decay() const noexcept;
  /// The decay given at construction.
  float decay() const noexcept { return decay_; }
  /// Number of update() calls (or the restored count).
  std::int64_t num_updates() const noexcept { return num_updates_; }
  /// Shadows by parameter name: handles to the live f32 tensors (clone to snapshot).
  std::map<std::string, Tensor> shadow() const;

  /// Copies the averaged weights into params (matched by name; rounded to nearest even to each
  /// tensor's dtype; versions bumped). Every name must be known and every shape match: throws
  /// ValueError / ShapeError before writing anything. The tensors must be contiguous.
  void copy_to(const NamedParams& params) const;

  /// Swaps the averaged weights into the EMA's own parameters for evaluation and restores the
  /// training weights bit for bit on destruction, also when the scope is left by an exception.
  /// Values are copied (the parameter tensors stay the same objects, so modules and optimizers
  /// keep working); do not run optimizer steps inside the scope.
  class Swap {
   public:
    /// Backs up every parameter (workspace memory), then writes the averages into them.
    explicit Swap(const EMA& ema);
    /// Restores the backed-up values.
    ~Swap();
    Swap(const Swap&) = delete;
    Swap& operator=(const Swap&) = delete;

   private:
    void restore() noexcept;
    const EMA& ema_;
    std::vector<Tensor> backup_;
  };

  /// Handles to the live shadows, in construction order, and the update count.
  EmaState state() const;
  /// Copies a saved state's shadows in (any dtype, converted to f32) and restores the count;
  /// throws StateError (changing nothing) on a missing, extra, repeated or ill-shaped entry.
  void load_state(const EmaState& state);

 private:
  NamedParams params_;
  std::vector<Tensor> shadows_;  ///< f32, same order as params_
  float decay_;
  bool warmup_;
  std::int64_t num_updates_ = 0;
};

}  // namespace mixprec::optim
