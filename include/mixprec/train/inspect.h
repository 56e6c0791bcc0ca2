#pragma once
/// Mixed-precision readiness, layer by layer: trains a model for a few steps in one precision
/// mode and records, for every leaf module, its activations (output), the gradient of its
/// output, the gradient of its parameters and the update of its parameters each step; then says
/// what FP16, BF16 and FP8 would do to them (numerics/tensor_stats.h), gives each layer a
/// verdict by one written rule (decide_verdict), flags GEMM dimensions that waste vector lanes,
/// and estimates bytes per parameter per precision mode. What `mixprec inspect` prints;
/// docs/diagnostics.md explains every number.
///
///   InspectOptions o;  o.model = "cnn";  o.precision = "bf16";  o.steps = 5;
///   InspectReport r = inspect_builtin(o);
///   std::cout << to_text(r);  write_inspect_svg(r, "layers.svg");
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"
#include "mixprec/numerics/tensor_stats.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/module.h"

namespace mixprec::train {

/// The four verdicts, from most to least demanding on the layer's numerics.
enum class Verdict : std::uint8_t {
  safe_fp16,          ///< "safe in fp16": everything fits fp16 without a loss scale
  needs_loss_scaling, ///< "needs loss scaling": gradients flush in fp16 unless scaled, and fit when scaled
  bf16_fine,          ///< "bf16 fine": fp16's range does not hold the layer, bf16's does
  keep_fp32,          ///< "keep in fp32": no 16-bit format holds the layer
};
/// "safe in fp16", "needs loss scaling", "bf16 fine", "keep in fp32".
const char* name(Verdict verdict);

/// The tolerances of the verdict rule (docs/diagnostics.md, "The verdict rule").
struct VerdictThresholds {
  /// Fraction of values that may overflow a format before it is ruled out (0: a single Inf
  /// turns the loss into NaN or skips the step).
  double overflow = 0.0;
  /// Fraction of values that may flush to zero in a format before it is ruled out.
  double underflow = 0.01;
  /// Fraction of weight updates a bf16 weight may lose before bf16 is ruled out as a fallback.
  double lost_updates = 0.1;
};

/// A dimension of a GEMM or convolution that is not a multiple of the vector/tile width.
struct AlignmentWarning {
  std::string layer;      ///< module path ("" for the batch, which every layer shares)
  std::string dimension;  ///< "in_features", "out_features", "in_channels", "out_channels", "batch"
  std::int64_t size = 0;
  int multiple = 8;       ///< 8 (any 16-bit GEMM) or 16 (bf16 AVX-512 tiles)
  std::string message;    ///< one line naming the layer, the dimension and the fix
};

/// Alignment warnings for every Linear (in/out features) and Conv2d (in/out channels) leaf of
/// model, and for batch: a size that is not a multiple of 8 always; one that is a multiple of 8
/// but not of 16 only when bf16 is true (the compute dtype is bf16).
std::vector<AlignmentWarning> alignment_warnings(const nn::Module& model, std::int64_t batch,
                                                 bool bf16);

/// Everything recorded for one leaf module.
struct LayerReport {
  std::string path;  ///< e.g. "features.0"
  std::string type;  ///< e.g. "Conv2d"
  Shape output_shape;            ///< as last seen
  std::int64_t parameters = 0;   ///< elements of the module's own parameters
  numerics::TensorStats activation;        ///< the module's output, in the dtype it was computed in
  numerics::TensorStats output_grad;       ///< gradient of the output, unscaled (divided by the loss scale)
  numerics::TensorStats output_grad_scaled;  ///< the same as backward saw it (times the scale); empty
                                   ///< unless a loss scale was in use (fp16)
  numerics::TensorStats weight_grad;       ///< gradients of the module's parameters (weight and bias), unscaled
  numerics::TensorStats weight_grad_scaled;  ///< the same times the loss scale; empty unless fp16
  numerics::TensorStats weight_update;     ///< Δw = master after - master before, of the steps not skipped
  numerics::LostUpdates lost_updates;      ///< of those updates (numerics/tensor_stats.h)
  /// Largest fraction of this layer's unscaled gradients (output and parameters) that would
  /// flush to zero in fp16 at the reference loss scale 2^InspectReport::reference_scale_log2.
  double fp16_grad_underflow_at_reference = 0;
  Verdict verdict = Verdict::safe_fp16;
  std::string reason;  ///< the rule's clause that decided, with the numbers
};

/// A verdict and the clause of the rule that decided it, with its numbers.
struct VerdictResult {
  Verdict verdict;
  std::string reason;
};
/// The verdict rule, applied to one layer's statistics (its activation, output_grad,
/// weight_grad and lost_updates; nothing else is read). reference_scale_log2: the loss scale,
/// as a power of two, at which gradients are tested for "fit with loss scaling". The rule is
/// written down in docs/diagnostics.md and above this function's definition.
VerdictResult decide_verdict(const LayerReport& layer, int reference_scale_log2,
                             const VerdictThresholds& thresholds = {});

/// The largest k in [-64, 64] such that amax * 2^k <= fp16 max, i.e. the largest power-of-two
/// loss scale under which no gradient of magnitude amax overflows fp16; 0 if amax is 0 or not
/// finite. A dynamic GradScaler settles within a factor of 2 of it.
int reference_scale_log2(double grad_amax);

/// Bytes per parameter of one precision mode, training with Adam.
struct MemoryModelRow {
  std::string mode;         ///< "fp32", "bf16 / fp16 (fp32 master)", "pure-bf16", "pure-bf16-sr"
  double persistent = 0;    ///< weight + gradient + optimizer state, held between steps
  double transient = 0;     ///< the 16-bit weight copy autocast makes for the step (0: none)
  std::string breakdown;    ///< e.g. "4 weight + 4 grad + 8 Adam m,v"
};
/// The memory model of docs/diagnostics.md: fp32 16 B; mixed bf16/fp16 16 B + 2 B transient;
/// pure-bf16 16 B (2 weight + 2 grad + 4 master + 8 Adam); pure-bf16-sr 12 B.
std::vector<MemoryModelRow> memory_model();

/// What the memory tracker (core/memory.h) measured in the inspected run.
struct MeasuredMemory {
  /// (parameter + gradient + optimizer_state bytes) / parameter count, while gradients are held.
  double persistent_per_parameter = 0;
  /// The largest rise of activation bytes over one step's forward and backward, above what
  /// was held before the step (this includes autocast's 16-bit weight copies).
  std::size_t activation_peak = 0;
};

/// How inspect_training trains: Adam, a GradScaler in fp16 mode, cross-entropy loss.
struct InspectConfig {
  /// fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto, fp8 or fp8-delayed (default recipe)
  std::string precision = "fp32";
  int steps = 5;                   ///< optimizer steps, in [1, 10000]
  float lr = 1e-3f;                ///< Adam's learning rate (> 0)
  std::uint64_t seed = 0;          ///< stochastic rounding (pure-bf16-sr)
  VerdictThresholds thresholds;
};

/// One mini-batch for inspect_training: inputs [B, ...] f32 and B class ids.
struct InspectBatch {
  Tensor inputs;
  std::vector<std::int64_t> targets;
};

/// The whole report; to_json/to_text/render_inspect_svg print it.
struct InspectReport {
  std::string model;       ///< name, or "custom"
  std::string data;        ///< "fashion-mnist", "synthetic" or "custom"
  std::string precision;   ///< the mode run ("auto" resolved)
  int steps = 0;
  std::int64_t batch_size = 0;
  std::uint64_t seed = 0;
  int threads = 0;
  float lr = 0;
  VerdictThresholds thresholds;
  std::vector<double> losses;          ///< per step, as computed (before scaling)
  bool loss_scaling = false;           ///< a GradScaler was enabled (fp16)
  std::vector<double> loss_scales;     ///< scale used by each step's backward (1 if none)
  std::int64_t skipped_steps = 0;      ///< steps skipped (Inf/NaN gradients, or an fp8 Inf/NaN amax)
  /// fp8 runs: every fp8 layer's roles (input, weight, grad) with the amax, history max and
  /// scale after the last step, and the largest saturated and flushed fractions of any step
  /// (every cast of the run is counted); empty in the other modes.
  std::vector<nn::Fp8LayerReport> fp8;
  int reference_scale_log2 = 0;        ///< from the largest unscaled gradient of any layer
  std::vector<LayerReport> layers;     ///< leaf modules in the order they first ran
  std::vector<AlignmentWarning> alignment;
  std::int64_t parameter_count = 0;
  std::vector<MemoryModelRow> memory;  ///< memory_model()
  MeasuredMemory measured;
};

/// Trains model (f32 parameters, as built; cast here per the precision mode) for config.steps
/// steps on next_batch(step) and reports every leaf module. Each step: forward and
/// cross-entropy under autocast, scaler.scale(loss).backward(), scaler.unscale, scaler.step,
/// scaler.update, zero_grad. ValueError for an unknown precision, steps outside [1, 10000], a
/// non-positive lr, or a batch whose sizes disagree; the model's own errors pass through.
InspectReport inspect_training(nn::Module& model,
                               const std::function<InspectBatch(int step)>& next_batch,
                               const InspectConfig& config);

/// What `mixprec inspect` runs: a built-in model (models/zoo.h) on its data.
struct InspectOptions {
  std::string model;               ///< models::model_names()
  std::string precision = "fp32";
  int steps = 5;
  std::int64_t batch_size = 64;    ///< in [1, 65536]
  std::uint64_t seed = 0;          ///< weights, data order, synthetic data
  std::string data_dir;            ///< Fashion-MNIST directory; "" = Debian's default
  VerdictThresholds thresholds;
};

/// Builds models::make_model(model, seed), loads steps * batch_size training samples
/// (Fashion-MNIST, or synthetic data for seed-mlp, as `mixprec train` does) and runs
/// inspect_training with Adam at lr 1e-3. ValueError naming the flag for a bad option.
InspectReport inspect_builtin(const InspectOptions& options);

/// The report as JSON with stable keys (documented in docs/diagnostics.md).
std::string to_json(const InspectReport& report, int indent = 2);
/// The report as aligned text: header, per-layer summary with verdicts, per-tensor details,
/// alignment warnings, memory.
std::string to_text(const InspectReport& report);
/// The report as an SVG picture: one row per layer with the magnitude range (smallest nonzero
/// to largest) of activations, output gradients, parameter gradients and updates on a log
/// axis, the fp16/bf16/fp8 max and min-normal walls, and each layer's verdict.
std::string render_inspect_svg(const InspectReport& report);
/// Writes render_inspect_svg(report) to path atomically; ValueError naming the path otherwise.
void write_inspect_svg(const InspectReport& report, const std::string& path);

}  // namespace mixprec::train
