#pragma once
/// The precision autopilot (--precision auto-layer): every GEMM layer (each leaf Linear and
/// Conv2d module) starts in a 16-bit compute dtype and moves up (fp16 -> bf16 -> fp32) or back
/// down, one layer at a time, on evidence gathered from the run itself:
///   - on sampled steps (every AutopilotOptions::sample_every steps, and the step after every
///     skipped one) a forward observer counts, per layer, what its output and its output's
///     gradient hold (in one pass at the exact rounding boundaries of numerics::cast_thresholds:
///     non-finite values, largest magnitude, fp16
///     subnormals and flushes at the loss scale in use), and the layer's GEMM FLOPs;
///   - the GradScaler's skip history over the last steps.
/// The rules (docs/training.md, "Precision autopilot"), checked after every sampled step:
///   up   overflow   a 16-bit layer made Inf/NaN from finite inputs: one dtype up at once;
///   up   underflow  more than `underflow` of an fp16 layer's output gradients (as backward saw
///                   them, scaled) were fp16 subnormals, i.e. the distribution runs off fp16's
///                   bottom at the scale the whole model shares: to bf16;
///   up   skips      the scaler skipped at least skip_limit of the last skip_window steps: the
///                   fp16 layer whose values came closest to 65504 goes to bf16;
///   down            a layer above its starting dtype whose last `probation` samples all fit the
///                   dtype below with `headroom` to spare goes back down; a layer that then has
///                   to go up again waits twice as long next time.
/// Under data parallelism (combine_over) the rules see the statistics of all ranks combined.
/// Every move is recorded with its step and reason; policy() is what --policy-out writes and
/// --policy replays (with the autopilot frozen). Parameters stay f32 (the GradScaler and fp32
/// master weights of autocast), so there are no lost updates in 16-bit weights to watch.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/nn/module.h"

namespace mixprec::train {

/// One move of a layer's compute dtype.
struct LayerMove {
  std::int64_t step = 0;  ///< the optimizer step (skipped ones counted) after which it applied
  std::string layer;      ///< module path, e.g. "layers.1"
  DType from = DType::f16, to = DType::bf16;
  std::string reason;     ///< the rule that fired, with its numbers
};

/// A compute dtype per layer: what --policy-out writes and --policy replays. The file is JSON:
///   {"format": "mixprec-layer-policy", "version": 1, "model": "sensor-mlp", "compute": "fp16",
///    "layers": {"layers.1": "bf16", "layers.4": "fp16", ...}, "moves": [{"step": ..., ...}]}
/// Dtypes are written fp16, bf16 or fp32; "moves" is informative (how the policy came about).
struct LayerPolicy {
  std::string model;           ///< the model it was made for
  DType compute = DType::bf16; ///< the dtype layers start in
  std::vector<std::pair<std::string, DType>> layers;  ///< path and dtype, in model order
  std::vector<LayerMove> moves;

  std::string to_json_text() const;
  /// ValueError naming `source` (a file name) and the offending key for anything malformed: not
  /// JSON, another format or version, a dtype other than fp16/bf16/fp32, a layer given twice.
  static LayerPolicy parse(const std::string& text, const std::string& source);
  /// Reads and parses a file (ValueError naming it if it cannot be read).
  static LayerPolicy read(const std::string& path);
  /// Writes the file atomically (io/atomic_file.h).
  void write(const std::string& path) const;
};

/// "fp16", "bf16", "fp32" (the names --compute and policy files use).
const char* layer_dtype_name(DType dtype);

/// The autopilot's thresholds; the defaults are what `mixprec train` uses.
struct AutopilotOptions {
  std::int64_t sample_every = 10;  ///< gather statistics every N steps (and after a skip)
  double underflow = 0.01;         ///< fraction of fp16 subnormal output gradients that moves a layer up
  int probation = 10;              ///< clean samples before a raised layer may move down
  double headroom = 16;            ///< moving down to fp16 needs |values| <= 65504 / headroom
  int skip_window = 20;            ///< steps of scaler history the skip rule looks at
  int skip_limit = 10;             ///< skipped steps in that window that move a layer up
};

class PrecisionAutopilot {
 public:
  /// Takes charge of model's leaf Linear and Conv2d modules (module paths in model order),
  /// setting each one's compute dtype to `start` (f16 or bf16: also the floor no layer goes
  /// below). ValueError for another start dtype or a model without such layers.
  PrecisionAutopilot(nn::Module& model, std::string model_name, DType start, AutopilotOptions options = {});
  ~PrecisionAutopilot();
  PrecisionAutopilot(const PrecisionAutopilot&) = delete;
  PrecisionAutopilot& operator=(const PrecisionAutopilot&) = delete;

  /// Data parallel: the statistics of each sampled step are summed (counts, FLOPs) and maxed
  /// (largest values, overflow flags) over comm's ranks before the rules run, so every rank sees
  /// the whole global batch's evidence and makes the same moves at the same step (their skip
  /// history and loss scale already agree). end_step is then collective. comm must outlive this.
  void combine_over(const dist::Communicator& comm);

  /// Replays a policy (--policy): sets every listed layer's dtype and freezes the autopilot (no
  /// statistics, no moves). ValueError naming `source` and the layer for a layer the model does
  /// not have (listing those it has), before anything changes.
  void replay(const LayerPolicy& policy, const std::string& source);
  bool frozen() const;

  /// Whether the step about to run gathers statistics (then install observer() around its
  /// forward passes: nn::ForwardObserverScope).
  bool sampling() const;
  nn::ForwardObserver* observer();
  /// After a step: whether the optimizer applied it, and the loss scale its backward ran at
  /// (1 without scaling). Applies the rules to the statistics gathered (if it was sampled) and
  /// returns the moves it made, which take effect from the next step.
  std::vector<LayerMove> end_step(std::int64_t step, bool applied, double loss_scale);

  /// The layers, their current dtypes and every move so far.
  LayerPolicy policy() const;
  const std::vector<LayerMove>& moves() const;
  /// Of the layers' GEMM FLOPs (forward, as measured on the last sampled step; frozen, on the
  /// first step), the share their current dtypes compute in 16 bits; 0 before any step.
  double sixteen_bit_flop_share() const;

  /// Everything that decides future moves, as JSON text, for checkpoints (a resume continues
  /// exactly); load_state: StateError if it does not describe this model's layers. `merges`
  /// (what Module::upgrade_state merged in the same checkpoint's weights) maps the layers of an
  /// older layout: the layers of one merge become one, in the most precise of their dtypes
  /// (fp32 > bf16 > fp16: the merged layer must hold what each needed), its clean count the
  /// least and its probation the longest of theirs, came_down if any had, their FLOPs summed.
  std::string state() const;
  void load_state(const std::string& text, const std::vector<nn::StateMerge>& merges = {});

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace mixprec::train
