#pragma once
/// TrainStep: the one training step of mixprec. The Trainer, `mixprec bench`, `mixprec profile`
/// and `mixprec inspect` all run it, so what the benchmark times is exactly what training does.
///
/// It owns the precision setup (the precision mode resolved, the autocast policy, parameters cast
/// to their storage dtype, fp32 masters or stochastic rounding), the optimizer, the GradScaler,
/// the learning-rate schedule and the store of autocast's 16-bit weight copies, and runs one optimizer step as the seeds prescribe:
///   for each of `accum` micro-batches: forward and loss under autocast only, then
///     scaler.scale(loss / accum).backward() outside it;
///   scaler.unscale(optimizer), which (fp16) also measures the gradient norm in the same pass;
///   clip the global norm (when clip > 0; the norm is measured every step either way);
///   scaler.step(optimizer) (skipped on Inf/NaN), scaler.update(), scheduler.step() (which only
///   advances when the optimizer did), zero_grad().
/// Data parallel (a Communicator of N > 1 ranks): before unscaling, the gradients are averaged
/// over the ranks (dist::GradientSync), so every rank's scaler sees the same Inf/NaN and skips
/// together, and clipping uses the global norm. With shard_optimizer (ZeRO-1) each rank's
/// optimizer owns 1/N of the flat parameter space (dist::ShardedParameters): the gradients are
/// reduce-scattered, found-inf and the norm are agreed by reductions, and the updated pieces
/// are all-gathered after the step.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/precision.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/data/batch_source.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/dist/sharded_parameters.h"
#include "mixprec/nn/module.h"
#include "mixprec/optim/lr_scheduler.h"
#include "mixprec/optim/optimizer.h"
#include "mixprec/runtime/weight_copies.h"
#include "mixprec/train/precision_autopilot.h"

namespace mixprec::nn {
class Fp8Layers;
}

namespace mixprec::train {

/// What shapes one optimizer step. The CLI flags of `mixprec train` and `mixprec bench` that
/// carry the same names fill it.
struct StepConfig {
  /// fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto, auto-layer, fp8, fp8-delayed
  std::string precision = "bf16";
  /// auto-layer only: the 16-bit dtype layers start in, fp16 or bf16; "" = the hardware's
  /// (amp::default_layer_compute).
  std::string compute = "";
  /// auto-layer only: a layer policy file (train/precision_autopilot.h) to replay with the
  /// autopilot frozen; "" = let the autopilot move layers.
  std::string layer_policy = "";
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
  /// Data parallel only: each rank keeps the optimizer state of its share of the parameters
  /// (ZeRO stage 1). Needs a communicator of more than one rank.
  bool shard_optimizer = false;
  /// Data parallel only: the format gradients travel in (fp32, bf16, fp16; dist::WireDType).
  std::string wire_dtype = "fp32";
  /// Fault injection for tests and drills (fp16 only): "N" writes +Inf into one gradient element
  /// before every Nth step's unscale, on every rank; "N@R" on rank R only. The GradScaler must
  /// then skip that step on every rank. "" = never.
  std::string inject_overflow = "";
  /// fp8-delayed: steps of amax history, >= 1 (16: see runtime::Fp8Recipe::amax_history).
  std::int64_t fp8_amax_history = 16;
  /// fp8 recipes: the scales are divided by 2^margin, in [0, 64].
  int fp8_margin = 0;
  /// fp8 recipes: "hybrid" (E4M3 forward, E5M2 gradients) or "e4m3".
  std::string fp8_format = "hybrid";

  /// "on": capture the forward and backward of a micro-batch as a graph once per batch shape
  /// and replay it (train/step_graphs.h; `--cuda-graphs on`): cuda, or devsim, which emulates a
  /// capture. Where a graph cannot apply the step runs eagerly and says why once. "off": never.
  std::string graphs = "off";
  /// ValueError naming the CLI flag at fault (e.g. "--lr must be a positive number <= 100").
  void validate(const char* op) const;
};

/// StepConfig::inject_overflow parsed: every = 0 for none; rank = -1 for every rank.
struct OverflowInjection {
  std::int64_t every = 0;
  int rank = -1;
};
/// Parses "" | "N" | "N@R"; ValueError naming --inject-overflow otherwise.
OverflowInjection parse_overflow_injection(const std::string& text);

/// What one optimizer step did.
struct StepOutcome {
  /// Global L2 norm of the unscaled gradients before clipping (Inf/NaN on a step the scaler
  /// skips): a 0-d f32 tensor where the gradients live; item() reads it (one download).
  Tensor grad_norm;
  bool applied = false;  ///< false when the scaler skipped the update (Inf/NaN gradients)
};

class TrainStep {
 public:
  /// Resolves the precision (auto: amp::choose_precision for this CPU, or for the GPU when the
  /// current device is cuda), casts the model's parameters to the policy's storage dtypes, and
  /// builds the optimizer over
  /// model.parameters(), the scaler (enabled for fp16 only) and the schedule.
  /// ValueError on an invalid config (config.validate).
  /// comm: the ranks of a data-parallel job (not owned; null or one rank: a single process).
  /// ValueError for shard_optimizer without several ranks, or a pure-bf16 mode with several.
  TrainStep(nn::Module& model, const StepConfig& config, const dist::Communicator* comm = nullptr);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  /// One micro-batch: forward_loss() runs under this step's autocast state and returns the
  /// (scalar) loss; then (loss / accum), scaled by the GradScaler, is back-propagated with
  /// autocast off. Returns the loss value (as loss.item() read it, before scaling).
  double accumulate(const std::function<Tensor()>& forward_loss);
  /// accumulate() without its host read: the same forward and scaled backward, returning the
  /// (unscaled) loss where it lives, unread. What the CUDA-graph capture probe captures
  /// (train/capture_probe.h): a host read cannot be part of a graph, so a graphed step would
  /// read the loss after replaying it.
  Tensor forward_backward(const std::function<Tensor()>& forward_loss);
  /// The gradient accumulate()'s backward brings the loss forward_loss returns (1 * scale /
  /// accum, rounded to f32 as the backward rounds it), as an f32 scalar on the current device:
  /// what a fused loss (cross_entropy's expected_grad, Task::training_loss) is promised. Valid
  /// until apply() changes the scale; ask for it inside forward_loss.
  Tensor loss_gradient();
  /// After the micro-batches: averages the gradients over the ranks (data parallel), unscales
  /// them and measures their global norm, and when clip > 0 the clipping coefficient, which
  /// apply()'s optimizer pass multiplies into the gradients (the gradients themselves stay
  /// unclipped in between; sharded, they are clipped in place). Returns the norm (Inf/NaN
  /// when the step will be skipped) as a 0-d f32 tensor where the gradients live: reading it is
  /// the caller's choice (one download), so a step needs no host read for it.
  Tensor unscale_and_clip();
  /// Applies the update (skipped on Inf/NaN), updates the scale and the schedule, zeroes the
  /// gradients. Returns whether the update was applied.
  bool apply();
  /// accum x accumulate(forward_loss), unscale_and_clip(), apply(); `losses` (if not null) gets
  /// the sum of the micro-batch losses.
  StepOutcome run(const std::function<Tensor()>& forward_loss, double* losses = nullptr);

  /// A micro-batch's loss computed from the batch the step hands it: the caller's batch, or,
  /// when the step is captured as a graph, a batch of static device buffers with the same
  /// values (StepConfig::graphs).
  using BatchLoss = std::function<Tensor(const data::Batch&)>;
  /// forward_backward() on a micro-batch given as data: with StepConfig::graphs "on", captured
  /// once per batch shape and replayed after (train/step_graphs.h), the same bits; else exactly
  /// forward_backward([&] { return loss_of(batch); }).
  Tensor forward_backward(const data::Batch& batch, const BatchLoss& loss_of);
  /// accumulate() on a micro-batch given as data: forward_backward(batch, loss_of), then the
  /// loss read.
  double accumulate(const data::Batch& batch, const BatchLoss& loss_of);
  /// run() over `accum` reuses of one micro-batch, through accumulate(batch, loss_of).
  StepOutcome run(const data::Batch& batch, const BatchLoss& loss_of, double* losses = nullptr);
  /// With graphs on: graphs captured and replays so far, and why none apply ("" if they do).
  struct GraphStats {
    std::size_t captures = 0, replays = 0;
    std::string refusal;
  };
  GraphStats graph_stats() const;

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

  /// The optimizer that updates the parameters: over model.parameters(), or with
  /// shard_optimizer over this rank's pieces (shards()->views()).
  optim::Optimizer& optimizer();
  /// Data parallel: the number of gradient buckets (0 for one process).
  std::size_t gradient_buckets() const;
  /// ZeRO-1's layout; null unless shard_optimizer.
  const dist::ShardedParameters* shards() const;
  /// The optimizer state as an unsharded optimizer over model.parameters() would hold it (names
  /// "param.<i>.<buffer>"); with shard_optimizer a collective every rank must call.
  optim::OptimizerState full_optimizer_state() const;
  /// The names of full_optimizer_state()'s tensors, without communicating.
  std::vector<std::string> full_optimizer_tensor_names() const;
  /// Loads a full state (from full_optimizer_state of a run on any number of ranks, sharded or
  /// not); StateError before anything changes if it does not fit.
  void load_full_optimizer_state(const optim::OptimizerState& state);
  amp::GradScaler& scaler();
  optim::LRScheduler* scheduler();  ///< null for "none"
  /// The 16-bit weight copies of this step's model (runtime::WeightCopies): accumulate() and apply()
  /// lend them to their autocast regions and optimizer step; lend them (runtime::UseWeightCopies)
  /// to other forward passes of the model, e.g. evaluation, so that they reuse the copies too.
  runtime::WeightCopies& weight_copies();
  /// The per-layer precision autopilot of auto-layer (null in every other mode).
  PrecisionAutopilot* autopilot();
  /// fp8 recipes: the fp8 Linears and their scaling state (null in the other modes).
  nn::Fp8Layers* fp8_layers();
  const PrecisionAutopilot* autopilot() const;

 private:
  Tensor forward(const std::function<Tensor()>& forward_loss);
  void backward(Tensor loss);
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace mixprec::train
