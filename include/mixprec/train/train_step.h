#pragma once
/// TrainStep: the one training step of mixprec. The Trainer, `mixprec bench`, `mixprec profile`
/// and `mixprec inspect` all run it, so what the benchmark times is exactly what training does.
///
/// It owns the precision setup (the precision mode resolved, the autocast policy, parameters cast
/// to their storage dtype, fp32 masters or stochastic rounding), the optimizer, the GradScaler and
/// the learning-rate schedule, and runs one optimizer step as the seeds prescribe:
///   for each of `accum` micro-batches: forward and loss under autocast only, then
///     scaler.scale(loss / accum).backward() outside it;
///   scaler.unscale(optimizer), which (fp16) also measures the gradient norm in the same pass;
///   clip the global norm (when clip > 0; the norm is measured every step either way);
///   scaler.step(optimizer) (skipped on Inf/NaN), scaler.update(), scheduler.step() (which only
///   advances when the optimizer did), zero_grad().
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/tensor.h"
#include "mixprec/nn/module.h"
#include "mixprec/optim/lr_scheduler.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::train {

/// What shapes one optimizer step. The CLI flags of `mixprec train` and `mixprec bench` that
/// carry the same names fill it.
struct StepConfig {
  std::string precision = "bf16";   ///< fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto
  std::string optimizer = "adam";   ///< sgd (momentum 0.9), adam, adamw
  float lr = 1e-3f;                 ///< > 0 (the peak of the cosine schedule)
  float weight_decay = 0.0f;        ///< >= 0 (L2 for sgd/adam, decoupled for adamw)
  /// Parameters kept out of weight decay (optim::DecayExclusions::parse): e.g. "bias,norm,embedding",
  /// the GPT recipe; "" decays every parameter. Two parameter groups when non-empty.
  std::string no_decay = "";
  float clip = 0.0f;                ///< max global gradient norm; 0 = measure it, do not clip
  int accum = 1;                    ///< micro-batches per optimizer step, >= 1
  std::string scheduler = "none";   ///< none, cosine (over scheduler_steps optimizer steps)
  std::int64_t scheduler_steps = 1; ///< cosine's length in optimizer steps, >= 1
  std::string loss_scaling = "dynamic";       ///< fp16: dynamic or predictive (amp::ScalingMode)
  std::int64_t scaler_growth_interval = 2000; ///< GradScalerOptions::growth_interval, >= 1
  std::uint64_t seed = 0;           ///< stochastic rounding's RNG

  /// ValueError naming the CLI flag at fault (e.g. "--lr must be a positive number <= 100").
  void validate(const char* op) const;
};

/// What one optimizer step did.
struct StepOutcome {
  float grad_norm = 0;   ///< global L2 norm of the unscaled gradients before clipping (Inf/NaN
                         ///< on a step the scaler skips)
  bool applied = false;  ///< false when the scaler skipped the update (Inf/NaN gradients)
};

class TrainStep {
 public:
  /// Resolves the precision (auto: amp::choose_precision for this CPU), casts the model's
  /// parameters to the policy's storage dtypes, and builds the optimizer over
  /// model.parameters(), the scaler (enabled for fp16 only) and the schedule.
  /// ValueError on an invalid config (config.validate).
  TrainStep(nn::Module& model, const StepConfig& config);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  /// One micro-batch: forward_loss() runs under this step's autocast state and returns the
  /// (scalar) loss; then (loss / accum), scaled by the GradScaler, is back-propagated with
  /// autocast off. Returns the loss value (as loss.item() read it, before scaling).
  double accumulate(const std::function<Tensor()>& forward_loss);
  /// After the micro-batches: unscales the gradients and measures their global norm, clipping
  /// it when clip > 0. Returns the norm (Inf/NaN when the step will be skipped).
  float unscale_and_clip();
  /// Applies the update (skipped on Inf/NaN), updates the scale and the schedule, zeroes the
  /// gradients. Returns whether the update was applied.
  bool apply();
  /// accum x accumulate(forward_loss), unscale_and_clip(), apply(); `losses` (if not null) gets
  /// the sum of the micro-batch losses.
  StepOutcome run(const std::function<Tensor()>& forward_loss, double* losses = nullptr);

  const StepConfig& config() const;
  amp::PrecisionMode mode() const;
  /// The mode's name after "auto" was resolved, e.g. "bf16".
  const std::string& precision_name() const;
  /// Why "auto" chose the mode ("" when the precision was given).
  const std::string& auto_reason() const;
  const amp::PrecisionPolicy& policy() const;
  /// Whether forward passes run under autocast, and its lower dtype.
  bool autocast() const;
  DType compute_dtype() const;

  optim::Optimizer& optimizer();
  amp::GradScaler& scaler();
  optim::LRScheduler* scheduler();  ///< null for "none"

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace mixprec::train
