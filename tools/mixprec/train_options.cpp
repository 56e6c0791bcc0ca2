#include "train_options.h"

#include <cstdio>

#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "step_flags.h"

namespace mixprec::tools {

#define MIXPREC_FIELD(field) [](train::TrainConfig& to, const train::TrainConfig& from) { to.field = from.field; }

TrainOptions::TrainOptions(CLI::App* cmd, bool with_run_flags) {
  train::TrainConfig& g = *given_;
  bind(cmd->add_option("--model", g.model, "Model: " + models::model_names())->capture_default_str(),
       MIXPREC_FIELD(model));
  bind(cmd->add_option("--data", g.data,
                       "Training data: fashion-mnist, synthetic, csv:PATH (a table with a header: "
                       "numeric feature columns and a --target column; --model mlp), idx:DIR (any "
                       "MNIST-format set: train-images-idx3-ubyte, train-labels-idx1-ubyte and the "
                       "t10k-* pair, raw or .gz), images:DIR (JPEG/PNG files in one folder per class, "
                       "DIR/train/<class>/ and DIR/val/<class>/ or DIR/<class>/ with --val-fraction held "
                       "out; classes numbered in sorted order; decoded and augmented as torchvision's "
                       "ImageNet recipe by --data-workers threads; --model resnet50 at --image-size), or "
                       "text:PATH[,PATH...] (text files or directories, "
                       "for language models; default /usr/share/games/fortunes from the Debian package "
                       "fortunes). Default: the model's own"),
       MIXPREC_FIELD(data));
  bind(cmd->add_option("--test-data", g.test_data,
                       "csv: held-out rows as csv:PATH (columns matched by name); without it "
                       "--val-fraction of the --data rows are held out"),
       MIXPREC_FIELD(test_data));
  bind(cmd->add_option("--target", g.target, "csv: the target column's name (default: the last column)"),
       MIXPREC_FIELD(target));
  bind(cmd->add_option("--task", g.task,
                       "csv: classification (the target holds class ids 0..K-1; cross-entropy, accuracy, "
                       "macro-F1) or regression (a real value; mean squared error, R²)")
           ->capture_default_str(),
       MIXPREC_FIELD(task));
  bind(cmd->add_option("--context", g.context, "Transformer: tokens per window (0 = the model's default)"),
       MIXPREC_FIELD(context));
  bind(cmd->add_option("--image-size", g.image_size,
                       "resnet50: height and width of the square input images, in [32, 4096] "
                       "(0 = 224)"),
       MIXPREC_FIELD(image_size));
  bind(cmd->add_option("--memory-format", g.memory_format,
                       "Image models: the layout of activations, contiguous (NCHW) or channels-last "
                       "(NHWC, what GPU convolutions run fastest in); the input is converted once "
                       "and every layer keeps it. Default: channels-last on a GPU and on CPUs "
                       "with avx512_bf16, contiguous on other CPUs"),
       MIXPREC_FIELD(memory_format));
  bind(cmd->add_option("--layers", g.layers, "Transformer: blocks (0 = the model's default)"),
       MIXPREC_FIELD(layers));
  bind(cmd->add_option("--heads", g.heads, "Transformer: attention heads, dividing --width (0 = default)"),
       MIXPREC_FIELD(heads));
  bind(cmd->add_option("--width", g.width, "Transformer: model width d_model (0 = the model's default)"),
       MIXPREC_FIELD(width));
  bind(cmd->add_option("--dropout", g.dropout, "Transformer: dropout probability")->capture_default_str(),
       MIXPREC_FIELD(dropout));
  bind(cmd->add_flag("--checkpoint-activations", given_->checkpoint_activations,
                     "Transformer: keep no activations inside a block; recompute them in backward "
                     "(less memory, about one more forward pass)"),
       MIXPREC_FIELD(checkpoint_activations));
  bind(cmd->add_option("--max-steps", g.max_steps,
                       "Stop after this many optimizer steps (any model; -1 = run all --epochs)")
           ->capture_default_str(),
       MIXPREC_FIELD(max_steps));
  val_fraction_ = cmd->add_option("--val-fraction", g.val_fraction,
                       "The share held out for validation, in (0, 1): text, the last bytes of the "
                       "corpus (default 0.1); csv without --test-data, rows drawn with --seed "
                       "(default 0.2); images without train/ and val/ folders, files drawn with --seed "
                       "(default 0.1)");
  bind(val_fraction_, MIXPREC_FIELD(val_fraction));
  if (with_run_flags) {
    precision_ = cmd->add_option("--precision", g.precision,
                                 "fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto (bf16 only where the "
                                 "CPU has native bf16), auto-layer (a compute dtype per Linear/Conv2d "
                                 "layer, moved up and down by the precision autopilot from the run's "
                                 "own overflow, underflow and skip statistics), fp8 (every Linear but "
                                 "the first and last runs fp8 GEMMs, scales from each tensor's own "
                                 "amax; bf16 autocast around them; emulated exactly on the CPU) or "
                                 "fp8-delayed (scales from an amax history)")
                     ->capture_default_str();
    bind(precision_, MIXPREC_FIELD(precision));
    bind(cmd->add_option("--compute", g.compute,
                         "auto-layer: the 16-bit dtype layers start in, fp16 or bf16 (default: fp16 "
                         "where the CPU has native fp16 arithmetic but no native bf16, else bf16)"),
         MIXPREC_FIELD(compute));
    policy_ = cmd->add_option("--policy", g.layer_policy,
                              "auto-layer: replay the per-layer dtypes of a policy file written by "
                              "--policy-out, with the autopilot frozen (implies --precision auto-layer "
                              "unless --precision is given). fp8/fp8-delayed: a layer listed as \"fp8\" "
                              "runs in fp8, one listed as bf16/fp16/fp32 stays out of fp8 (docs/fp8.md)");
    bind(policy_, MIXPREC_FIELD(layer_policy));
    bind(cmd->add_option("--policy-out", g.policy_out,
                         "auto-layer: write the layers' dtypes and the autopilot's moves (with their "
                         "steps and reasons) to this JSON policy file, after every epoch"),
         MIXPREC_FIELD(policy_out));
  }
  bind(cmd->add_option("--epochs", g.epochs, "Epochs to train (in total, counting resumed ones)")
           ->capture_default_str(),
       MIXPREC_FIELD(epochs));
  bind(cmd->add_option("--batch-size", g.batch_size, "Samples per micro-batch")->capture_default_str(),
       MIXPREC_FIELD(batch_size));
  bind(cmd->add_option("--lr", g.lr, "Learning rate (peak of the cosine schedule)")->capture_default_str(),
       MIXPREC_FIELD(lr));
  bind(cmd->add_option("--optimizer", g.optimizer, "sgd (momentum 0.9), adam or adamw")->capture_default_str(),
       MIXPREC_FIELD(optimizer));
  bind(cmd->add_option("--weight-decay", g.weight_decay, "Weight decay (decoupled for adamw)")
           ->capture_default_str(),
       MIXPREC_FIELD(weight_decay));
  bind(cmd->add_option("--no-decay", g.no_decay,
                       "Keep these out of weight decay: a comma-separated list of bias, norm, "
                       "embedding (the GPT recipe: bias,norm,embedding)"),
       MIXPREC_FIELD(no_decay));
  bind(cmd->add_option("--clip", g.clip, "Clip the gradient norm to this (after unscaling); 0 = off")
           ->capture_default_str(),
       MIXPREC_FIELD(clip));
  bind(cmd->add_option("--accum", g.accum, "Micro-batches accumulated per optimizer step")
           ->capture_default_str(),
       MIXPREC_FIELD(accum));
  bind(cmd->add_option("--cuda-graphs", g.cuda_graphs,
                       "on|off: capture each micro-batch's forward and backward as a CUDA graph "
                       "once per batch shape and replay it (--device cuda; devsim emulates it); "
                       "where a graph cannot apply the step runs without one and says why")
           ->capture_default_str(),
       MIXPREC_FIELD(cuda_graphs));
  bind(cmd->add_option("--scheduler", g.scheduler, "Learning-rate schedule: none or cosine")
           ->capture_default_str(),
       MIXPREC_FIELD(scheduler));
  bind(cmd->add_option("--loss-scaling", g.loss_scaling,
                       "fp16 loss scaling: dynamic (grow the scale every --scaler-growth-interval "
                       "clean steps, back off on overflow) or predictive (the largest power of "
                       "two that keeps the recent gradient amax 8x below the f16 maximum)")
           ->capture_default_str(),
       MIXPREC_FIELD(loss_scaling));
  bind(cmd->add_option("--scaler-growth-interval", g.scaler_growth_interval,
                       "fp16: clean steps before the dynamic scale grows (predictive: before an "
                       "overflow's extra margin decays)")
           ->capture_default_str(),
       MIXPREC_FIELD(scaler_growth_interval));
  bind(cmd->add_option("--seed", g.seed, "Seed of weights, shuffling and stochastic rounding")
           ->capture_default_str(),
       MIXPREC_FIELD(seed));
  bind(cmd->add_option("--threads", g.threads, "Compute threads (0 = OpenMP default)")->capture_default_str(),
       MIXPREC_FIELD(threads));
  bind(cmd->add_option("--data-workers", g.data_workers,
                       "images: threads decoding and augmenting the next batches in the background "
                       "(0 = on the training thread; -1 = min(cores, 4)); the batches are the same bits "
                       "whatever the count")
           ->capture_default_str(),
       MIXPREC_FIELD(data_workers));
  bind(cmd->add_option("--limit-train", g.limit_train, "Use only the first N training samples (-1 = all; images: N files drawn with --seed)")
           ->capture_default_str(),
       MIXPREC_FIELD(limit_train));
  bind(cmd->add_option("--limit-test", g.limit_test, "Use only the first N test samples (-1 = all; images: N files drawn with --seed)")
           ->capture_default_str(),
       MIXPREC_FIELD(limit_test));
  bind(cmd->add_option("--data-dir", g.data_dir,
                       "Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist, from "
                       "the Debian package dataset-fashion-mnist)"),
       MIXPREC_FIELD(data_dir));
  if (with_run_flags) {
    bind(cmd->add_option("--log", g.log_path, "Write a JSONL log: a header object, then one per epoch"),
         MIXPREC_FIELD(log_path));
    bind(cmd->add_option("--tensorboard", g.tensorboard,
                         "Write TensorBoard event files into this directory: per-step loss, lr, loss "
                         "scale, gradient norm and skips; per-epoch metrics and memory; log2 "
                         "histograms of weights and gradients with the fp16/bf16 ranges"),
         MIXPREC_FIELD(tensorboard));
    bind(cmd->add_option("--histogram-every", g.histogram_every,
                         "TensorBoard histograms every N optimizer steps (0 = none); fp8 runs also "
                         "write each fp8 layer's amax, scale and saturated/flushed fractions then")
             ->capture_default_str(),
         MIXPREC_FIELD(histogram_every));
    bind(cmd->add_option("--checkpoint-dir", g.checkpoint_dir,
                         "Write a checkpoint into this directory after every epoch (also every "
                         "--checkpoint-every-steps steps, and where SIGTERM/SIGINT stops the run)"),
         MIXPREC_FIELD(checkpoint_dir));
    bind(cmd->add_option("--checkpoint-every-steps", g.checkpoint_every_steps,
                         "Also checkpoint inside epochs every N optimizer steps (skipped ones count; "
                         "no evaluation pass), so that a preempted or killed run loses at most N "
                         "steps; needs --checkpoint-dir; 0 = only after epochs. A resume inherits "
                         "it unless given")
             ->capture_default_str(),
         MIXPREC_FIELD(checkpoint_every_steps));
    bind(cmd->add_option("--keep-checkpoints", g.keep_checkpoints,
                         "Keep only the newest N checkpoints (0 = all)")
             ->capture_default_str(),
         MIXPREC_FIELD(keep_checkpoints));
    bind(cmd->add_option("--resume", g.resume,
                         "Continue from a checkpoint, or from the newest complete one in a "
                         "directory; flags not given are taken from it"),
         MIXPREC_FIELD(resume));
    bind(cmd->add_option("--save-initial-weights", g.save_initial_weights,
                         "Write the freshly initialised weights to this safetensors file before "
                         "training (e.g. to start a PyTorch peer from the same point)"),
         MIXPREC_FIELD(save_initial_weights));
  }
  bind(cmd->add_flag("--detect-anomaly", given_->detect_anomaly,
                     "Stop at the first NaN/Inf an op produces in forward or backward, naming the "
                     "op, module, dtype, step and input statistics"),
       MIXPREC_FIELD(detect_anomaly));
  if (with_run_flags) {
    bind(cmd->add_flag("--shard-optimizer", given_->shard_optimizer,
                       "Data parallel (mpirun -np N, N >= 2): each rank keeps the optimizer state of "
                       "1/N of the parameters (ZeRO stage 1); checkpoints hold the full state, so a "
                       "sharded run resumes unsharded and the other way round"),
         MIXPREC_FIELD(shard_optimizer));
    bind(cmd->add_option("--wire-dtype", g.wire_dtype,
                         "Data parallel: the format gradients travel in between ranks: fp32, bf16 or "
                         "fp16 (16-bit: half the bytes; sums stay f32)")
             ->capture_default_str(),
         MIXPREC_FIELD(wire_dtype));
    bind(cmd->add_option("--fp8-amax-history", g.fp8_amax_history, kFp8AmaxHistoryHelp)
             ->capture_default_str(),
         MIXPREC_FIELD(fp8_amax_history));
    bind(cmd->add_option("--fp8-margin", g.fp8_margin, kFp8MarginHelp)->capture_default_str(),
         MIXPREC_FIELD(fp8_margin));
    bind(cmd->add_option("--fp8-format", g.fp8_format, kFp8FormatHelp)->capture_default_str(),
         MIXPREC_FIELD(fp8_format));
    bind(cmd->add_option("--inject-overflow", g.inject_overflow,
                         "Fault drill (fp16): put an Inf into the gradients every Nth step (N), or on "
                         "rank R only (N@R); every rank must skip that step together"),
         MIXPREC_FIELD(inject_overflow));
    bind(cmd->add_flag("--sync-batchnorm", given_->sync_batchnorm,
                       "Data parallel (mpirun -np N): BatchNorm layers normalise with the "
                       "statistics of the whole global batch, exchanged between the ranks in "
                       "every training step, so N ranks train like one process (default: each "
                       "rank's own shard). With one process it is accepted and changes nothing"),
         MIXPREC_FIELD(sync_batchnorm));
  }
  bind(cmd->add_flag("--no-progress", no_progress_, "Never draw the progress bar"),
       [](train::TrainConfig& to, const train::TrainConfig&) { to.progress = false; });
}

#undef MIXPREC_FIELD

void TrainOptions::bind(CLI::Option* opt,
                        std::function<void(train::TrainConfig&, const train::TrainConfig&)> copy) {
  bound_.emplace_back(opt, std::move(copy));
}

train::TrainConfig TrainOptions::resolve() const {
  train::TrainConfig config;
  if (!given_->resume.empty()) {
    config = train::checkpoint_config(given_->resume);
    config.progress = true;
  }
  for (const auto& [opt, copy] : bound_) {
    if (opt->count() > 0) copy(config, *given_);
  }
  // A policy file is replayed by auto-layer: --policy alone asks for it.
  if (policy_ != nullptr && policy_->count() > 0 && precision_->count() == 0) config.precision = "auto-layer";
  // 0 means "the source's default" inside TrainConfig, so a given value must be a real share.
  MIXPREC_CHECK(val_fraction_->count() == 0 || (given_->val_fraction > 0.0 && given_->val_fraction < 1.0),
                ValueError, "train", "--val-fraction must be in (0, 1), got " << given_->val_fraction);
  return config;
}

std::string format_mib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace mixprec::tools
