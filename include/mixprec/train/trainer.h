#pragma once
/// The Trainer: the seeds' training loop done right for every precision mode, on any Module,
/// any BatchSource and any Task (train/task.h), with evaluation, metrics, a JSONL log and
/// atomic checkpoints that resume bit-identically. A registered model (models/zoo.h: the
/// built-ins, or a user's register_model) is built with its data and task from the config
/// alone; a user's own model, data and task go through the second constructor.
///
/// One optimizer step: for each of `accum` micro-batches, forward and loss under autocast only,
/// loss / accum scaled by the GradScaler (fp16) and backward; then unscale, gradient norm (and
/// clipping when clip > 0), scaler.step (skipped on Inf/NaN), scaler.update, scheduler.step
/// (which advances only if the optimizer did), zero_grad.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/core/memory.h"
#include "mixprec/data/batch_source.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/module.h"
#include "mixprec/train/metrics.h"
#include "mixprec/train/task.h"
#include "mixprec/train/train_step.h"

namespace mixprec::train {

/// Everything that defines a run. Checkpoints store it; a resumed run must agree with it on
/// every field that shapes the computation (see Trainer).
struct TrainConfig {
  std::string model = "mlp";        ///< models::model_names(), or a label for a user's model
  /// Where the data comes from: "" = the model's own (Fashion-MNIST, synthetic, or Debian's
  /// fortunes for a language model); "fashion-mnist"; "synthetic"; "text:PATH[,PATH...]" (files
  /// or directories of text, for language models); "csv:PATH" (a table: numeric feature columns
  /// and a target column, see data/tabular.h); "idx:DIR" (any MNIST-format set: train-* and
  /// t10k-* images and labels); "images:DIR" (JPEG/PNG files in class folders, for a model that
  /// takes [3, H, W] images, see data/image_folder.h).
  std::string data;
  std::string test_data;            ///< csv: "csv:PATH" of held-out rows; "" = split data
  std::string target;               ///< csv: the target column's name; "" = the last column
  /// csv: "classification" (class ids 0..K-1: cross-entropy) or "regression" (a real value:
  /// mean squared error). Other data: "classification" (or "" for a language model's own).
  std::string task = "classification";
  /// The model's input and output widths (models::ModelOptions::inputs/outputs). 0 = from the
  /// data; the Trainer stores them resolved so that a checkpoint rebuilds the same model.
  std::int64_t inputs = 0;
  std::int64_t outputs = 0;
  std::int64_t context = 0;         ///< transformer sizes (models::ModelOptions); 0 = default
  std::int64_t image_size = 0;      ///< square images of a model that takes any size (resnet50)
  /// Image models: "contiguous", "channels-last", or "" for the device's default
  /// (models::ModelOptions::memory_format). A layout, not a different computation: a checkpoint
  /// resumes under either.
  std::string memory_format;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t width = 0;
  float dropout = 0.0f;             ///< transformer dropout, in [0, 1)
  bool checkpoint_activations = false;  ///< recompute transformer blocks in backward
  std::int64_t max_steps = -1;      ///< stop after this many optimizer steps (-1 = no limit)
  /// The share held out for validation, in (0, 1): text, the last bytes of the corpus; csv
  /// without test_data, seeded random rows. 0 = the source's default (0.1 for text, 0.2 for
  /// csv), stored resolved.
  double val_fraction = 0;
  /// fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto, auto-layer, fp8, fp8-delayed
  std::string precision = "bf16";
  /// fp8 recipes (StepConfig::fp8_amax_history, fp8_margin, fp8_format).
  std::int64_t fp8_amax_history = 16;
  int fp8_margin = 0;
  std::string fp8_format = "hybrid";
  /// auto-layer (train/precision_autopilot.h): the dtype layers start in (StepConfig::compute),
  /// a policy file to replay instead of moving layers ("" = none), and where to write the
  /// layers' dtypes and moves after every epoch ("" = nowhere).
  std::string compute;
  std::string layer_policy;
  std::string policy_out;
  int epochs = 1;                   ///< >= 1
  std::int64_t batch_size = 128;    ///< micro-batch size, >= 1
  float lr = 1e-3f;                 ///< > 0
  std::string optimizer = "adam";   ///< sgd (momentum 0.9), adam, adamw
  float weight_decay = 0.0f;        ///< >= 0 (L2 for sgd/adam, decoupled for adamw)
  std::string no_decay;             ///< kept out of weight decay: StepConfig::no_decay
  float clip = 0.0f;                ///< max gradient norm; 0 = no clipping
  int accum = 1;                    ///< micro-batches per optimizer step, >= 1
  /// on|off: each micro-batch's forward and backward replayed from a captured graph (cuda, or
  /// devsim's emulation): StepConfig::graphs.
  std::string cuda_graphs = "off";
  std::string scheduler = "cosine"; ///< none, cosine (over all optimizer steps of the run)
  /// fp16 loss scaling (amp::ScalingMode): dynamic (grow/back off by trial) or predictive (from
  /// the measured gradient amax); ignored by the precisions that need no scaler.
  std::string loss_scaling = "dynamic";
  /// >= 1: clean steps before the fp16 scale grows (dynamic) or an unpredicted overflow's extra
  /// margin decays (predictive); GradScalerOptions::growth_interval.
  std::int64_t scaler_growth_interval = 2000;
  std::uint64_t seed = 0;           ///< weights, shuffling, stochastic rounding
  int threads = 0;                  ///< compute threads; 0 = leave the process setting alone
  /// images: threads decoding and augmenting images in the background, in [0, 256]; -1 = the
  /// default (data::default_image_workers()), 0 = on the training thread. Same batches either way.
  int data_workers = -1;
  std::int64_t limit_train = -1;    ///< use only the first N training samples; -1 = all
  std::int64_t limit_test = -1;     ///< use only the first N test samples; -1 = all
  std::string data_dir;             ///< Fashion-MNIST directory; "" = Debian's default
  std::string log_path;             ///< JSONL log; "" = none
  /// TensorBoard event files go into this directory ("" = none): per-step scalars, per-epoch
  /// metrics and memory, log2 histograms of weights and gradients (train/tensorboard_log.h).
  std::string tensorboard;
  std::int64_t histogram_every = 100;  ///< histograms every N optimizer steps; 0 = never
  std::string checkpoint_dir;       ///< checkpoint every epoch into this directory; "" = none
  int keep_checkpoints = 3;         ///< newest checkpoints kept in checkpoint_dir; 0 = all
  /// Also checkpoint inside an epoch every N optimizer steps (skipped steps count, as for
  /// max_steps), without an evaluation pass; 0 = only after epochs. Needs checkpoint_dir. Not
  /// part of the resume check: a resume inherits it unless given, and may change it.
  std::int64_t checkpoint_every_steps = 0;
  std::string resume;               ///< a checkpoint, or a directory of them (newest complete)
  /// Write the freshly initialised f32 weights (state dict) to this safetensors file before
  /// training, e.g. for a peer framework to start from the same point; "" = none. Not with resume.
  std::string save_initial_weights;
  bool progress = true;             ///< progress bar with ETA when stderr is a terminal
  bool detect_anomaly = false;      ///< stop at the first NaN/Inf an op makes (runtime/anomaly.h)
  /// Data parallel (mpirun): how the job is laid out over its ranks, not what it computes, so a
  /// checkpoint records them but a resume does not inherit them (a sharded run resumes unsharded,
  /// on any number of ranks). shard_optimizer: ZeRO-1 (StepConfig::shard_optimizer); wire_dtype:
  /// the format gradients travel in (fp32, bf16, fp16).
  bool shard_optimizer = false;
  std::string wire_dtype = "fp32";
  /// StepConfig::inject_overflow (fp16 fault drill; not inherited by a resume either).
  std::string inject_overflow;
  /// Data parallel: BatchNorm layers normalise with the global batch's statistics, exchanged
  /// between the ranks in every training step (ops::sync_batch_norm); false: each rank's own
  /// shard's. Changes nothing with one process. Unlike the layout fields above it decides what
  /// a multi-rank run computes, so a resume inherits it; a resume may still change it (it is
  /// not part of the compatibility check, like the number of ranks).
  bool sync_batchnorm = false;

  /// ValueError with an actionable message for any out-of-range or unknown value.
  void validate() const;
  /// The model options these fields give (seed and transformer sizes, unresolved).
  models::ModelOptions model_options() const;
  /// The fields that shape one optimizer step, with the schedule lasting scheduler_steps.
  StepConfig step_config(std::int64_t scheduler_steps) const;
};

/// Why Trainer::run returned early: a stop signal (SIGINT/SIGTERM) under handle_stop_signals.
struct Interruption {
  int signal = 0;              ///< SIGTERM or SIGINT
  int epoch = 0;               ///< the epoch it stopped in (1-based), or after
  std::int64_t steps = 0;      ///< optimizer steps taken (skipped ones included) when it stopped
  std::string checkpoint;      ///< the checkpoint to resume from ("" without checkpoint_dir)
};

/// What one epoch produced. Memory figures are peaks during the epoch, by category.
struct EpochMetrics {
  int epoch = 0;                    ///< 1-based
  std::int64_t optimizer_steps = 0; ///< optimizer steps applied since the run began
  double train_loss = 0;            ///< mean over the epoch's micro-batches with a finite loss
  std::int64_t nonfinite_losses = 0; ///< micro-batches whose loss was Inf/NaN (left out of train_loss)
  double test_loss = 0;             ///< mean evaluation loss (validation loss of a language model)
  double test_accuracy = 0;         ///< classification
  double macro_f1 = 0;              ///< classification
  double perplexity = 0;            ///< language model: exp(test_loss)
  double bits_per_byte = 0;         ///< language model over bytes: test_loss / ln 2
  double mse = 0;                   ///< regression: mean squared error in the target's units
  double r2 = 0;                    ///< regression: coefficient of determination, 1 - SSE / SST
  std::int64_t epoch_batches = 0;   ///< batches trained in this epoch (fewer if max_steps hit)
  std::int64_t train_samples = 0;   ///< training samples (tokens' windows) seen in this epoch
  bool complete = true;             ///< false: the run stopped inside this epoch (max_steps)
  double samples_per_second = 0;    ///< training samples / training seconds
  double train_seconds = 0, eval_seconds = 0;
  double loss_scale = 1;            ///< GradScaler scale at the end of the epoch (1 if disabled)
  std::int64_t skipped_steps = 0;   ///< steps skipped for Inf/NaN gradients in this epoch
  double grad_norm_mean = 0;        ///< mean of the finite (unscaled, pre-clip) gradient norms
  double grad_norm_max = 0;
  double lr = 0;                    ///< learning rate at the end of the epoch
  /// auto-layer: the share of the GEMM layers' FLOPs computed in 16 bits at the end of the
  /// epoch, and every layer's dtype ("layers.1=bf16,layers.4=fp16"); -1 and "" otherwise.
  double flops_16bit = -1;
  std::string layer_dtypes;
  /// fp8 runs: the epoch's fp8 summary as JSON text (layer path -> role -> amax, amax_history,
  /// scale at the end of the epoch, and the saturated/flushed fractions of the epoch's last
  /// observed step; docs/fp8.md); "" otherwise. The JSONL line's "fp8" object.
  std::string fp8;
  MemoryStats memory;               ///< peaks during the epoch
};

class Trainer {
 public:
  /// Validates the config, loads the data (ValueError naming files and fixes), builds the model,
  /// optimizer, scaler and scheduler, and applies config.resume: the checkpoint must come from
  /// the same model, precision, optimizer, batch size, accumulation, learning rate, weight
  /// decay, clipping, scheduler and seed (ValueError naming the first difference); `epochs` may
  /// grow. Training then continues after the checkpoint's epoch.
  ///
  /// Data parallel (dist::world() has several ranks): construction is collective. The ranks
  /// agree after each step that may fail on some of them only (checking the flags, reading the
  /// checkpoint, loading the data, setting up), compare their flags (naming the first field that
  /// differs from rank 0's), their builds, the checkpoint they read (its manifest), the data they
  /// loaded (source and sizes) and the resolved precision; on any failure or difference every
  /// rank throws the same dist::AgreedError naming the first rank concerned. A checkpoint
  /// resumes on any number of ranks (it holds no per-rank state).
  explicit Trainer(TrainConfig config);
  /// A user's model, data and task: config.model is only a label (checkpoints store it and a
  /// resume must match it); config.data, the transformer sizes and limit_* are not used. The
  /// model must be freshly built in f32 (the Trainer casts it to the precision's storage).
  /// ValueError for a null argument.
  Trainer(TrainConfig config, std::shared_ptr<nn::Module> model,
          std::shared_ptr<data::BatchSource> train_data, std::shared_ptr<data::BatchSource> eval_data,
          std::shared_ptr<Task> task);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains the remaining epochs, or until config.max_steps optimizer steps (counting skipped
  /// ones) were taken; calls on_epoch after each epoch (after its checkpoint is written), also
  /// after the partial epoch a max_steps stop ends. Returns every epoch's metrics, including
  /// those restored from a checkpoint.
  std::vector<EpochMetrics> run();
  /// One pass over the evaluation data under the run's autocast policy, in eval mode: the
  /// evaluation fields of EpochMetrics (test_loss and the task's metrics) filled in, and the
  /// confusion matrix written to `confusion` when given and the task is a classification.
  EpochMetrics evaluate_metrics(ConfusionMatrix* confusion = nullptr);
  /// Test-set confusion matrix and mean loss (classification only; ValueError otherwise).
  ConfusionMatrix evaluate(double* mean_loss = nullptr);

  const TrainConfig& config() const;
  /// The precision mode actually used ("auto" resolved), e.g. "bf16".
  const std::string& resolved_precision() const;
  nn::Module& model();
  /// The first epoch run() will train (1 + the resumed checkpoint's epoch, or that epoch
  /// itself when the checkpoint was written inside it).
  int next_epoch() const;
  /// What the model is trained for.
  const Task& task() const;

  std::function<void(const EpochMetrics&)> on_epoch;
  /// run() takes over SIGINT and SIGTERM (sigaction, restored when it returns): the first one
  /// finishes the current optimizer step, writes a checkpoint there (with checkpoint_dir; no
  /// evaluation, no log line) and returns, with interruption() saying where; a second one ends
  /// the process at once with _exit(128 + signal). Data parallel: the ranks take the largest
  /// flag after every step (one small all-reduce), so all stop at the same step. Same on every
  /// rank. Off by default: a library does not take signals unless asked.
  bool handle_stop_signals = false;
  /// Set when the last run() returned early because of a stop signal; empty otherwise.
  const std::optional<Interruption>& interruption() const;
  /// Lines of explanation printed before training (auto precision reasoning, warnings).
  std::function<void(const std::string&)> on_message;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// What `mixprec eval` reports for a checkpoint.
struct CheckpointEvaluation {
  TrainConfig config;   ///< as stored in the checkpoint
  std::string path;     ///< the checkpoint directory actually read
  int epoch = 0;
  models::TaskKind task = models::TaskKind::classification;
  EpochMetrics metrics;          ///< the evaluation fields: test_loss and the task's metrics
  ConfusionMatrix confusion{2};  ///< classification only (2 empty classes otherwise)
  double test_loss = 0;
};
/// Loads a checkpoint (or the newest in a directory), rebuilds its model under its precision and
/// evaluates it on the test set; data_dir/limit_test override the stored ones when non-empty/>0.
CheckpointEvaluation evaluate_checkpoint(const std::string& path, const std::string& data_dir = "",
                                         std::int64_t limit_test = -1);

/// Reads only the configuration stored in a checkpoint (for CLIs that fill in resumed flags).
TrainConfig checkpoint_config(const std::string& path);

}  // namespace mixprec::train
