#include "step_flags.h"

#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"

namespace mixprec::tools {

void validate_step_flags(const char* op, const std::string& model, int steps, int warmup,
                         std::int64_t batch_size, int threads) {
  models::model_spec(model);  // ValueError listing the models
  MIXPREC_CHECK(steps >= 1 && steps <= 100000, ValueError, op,
                "--steps must be in [1, 100000], got " << steps);
  MIXPREC_CHECK(warmup >= 0 && warmup <= 100000, ValueError, op,
                "--warmup must be in [0, 100000], got " << warmup);
  MIXPREC_CHECK(batch_size >= 1 && batch_size <= 65536, ValueError, op,
                "--batch-size must be in [1, 65536], got " << batch_size);
  MIXPREC_CHECK(threads >= 1 && threads <= 1024, ValueError, op,
                "--threads must be in [1, 1024], got " << threads);
}

void add_model_size_flags(CLI::App* cmd, models::ModelOptions& sizes) {
  cmd->add_option("--width", sizes.width,
                  "seed-mlp: hidden width W (1024-W-W-10) instead of 4096, for scaling runs; "
                  "transformers: the model width");
  cmd->add_option("--context", sizes.context, "Transformers: tokens per window (0 = default)");
  cmd->add_option("--image-size", sizes.image_size,
                  "resnet50: height and width of the square input images, in [32, 4096] (0 = 224)");
  cmd->add_option("--memory-format", sizes.memory_format,
                  "Image models: contiguous (NCHW) or channels-last (NHWC) activations (default: "
                  "channels-last on a GPU and on CPUs with avx512_bf16, contiguous on other CPUs)");
  cmd->add_option("--layers", sizes.layers, "Transformers: blocks (0 = default)");
  cmd->add_option("--heads", sizes.heads, "Transformers: attention heads (0 = default)");
  cmd->add_flag("--checkpoint-activations", sizes.checkpoint_activations,
                "Transformers: recompute each block in backward instead of keeping its activations");
}

void validate_model_sizes(const char* op, const std::string& model, const models::ModelOptions& sizes) {
  const bool lm = models::model_spec(model).task == models::TaskKind::language_model;
  MIXPREC_CHECK(sizes.width == 0 || lm || (model == "seed-mlp" && sizes.width >= 1 && sizes.width <= 16384),
                ValueError, op,
                "--width applies to seed-mlp (in [1, 16384]) and transformers, got " << sizes.width
                    << " for " << model);
  MIXPREC_CHECK(lm || (sizes.context == 0 && sizes.layers == 0 && sizes.heads == 0 &&
                       !sizes.checkpoint_activations),
                ValueError, op,
                "--context, --layers, --heads and --checkpoint-activations apply to transformers "
                "(gpt-mini), not to " << model);
}

void add_step_config_flags(CLI::App* cmd, train::StepConfig& step) {
  cmd->add_option("--optimizer", step.optimizer, "sgd (momentum 0.9), adam or adamw")->capture_default_str();
  cmd->add_option("--lr", step.lr, "Learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", step.weight_decay, "Weight decay (decoupled for adamw)")
      ->capture_default_str();
  cmd->add_option("--no-decay", step.no_decay,
                  "Keep these out of weight decay: a comma-separated list of bias, norm, embedding "
                  "(the GPT recipe: bias,norm,embedding)");
  cmd->add_option("--clip", step.clip, "Clip the gradient norm to this (after unscaling); 0 = off")
      ->capture_default_str();
  cmd->add_option("--accum", step.accum, "Micro-batches accumulated per optimizer step")
      ->capture_default_str();
  cmd->add_option("--cuda-graphs", step.graphs,
                  "on|off: capture each micro-batch's forward and backward as a CUDA graph once "
                  "per batch shape and replay it (--device cuda; devsim emulates it)")
      ->capture_default_str();
  cmd->add_option("--loss-scaling", step.loss_scaling,
                  "fp16 loss scaling: dynamic (grow/back off by trial) or predictive (from the "
                  "gradient amax)")
      ->capture_default_str();
  cmd->add_option("--scaler-growth-interval", step.scaler_growth_interval,
                  "fp16: clean steps before the loss scale grows")
      ->capture_default_str();
  cmd->add_option("--compute", step.compute,
                  "auto-layer: the 16-bit dtype layers start in, fp16 or bf16 (default: the hardware's)");
  cmd->add_option("--policy", step.layer_policy,
                  "auto-layer: replay this layer policy file (from train --policy-out), autopilot frozen");
  cmd->add_option("--fp8-amax-history", step.fp8_amax_history, kFp8AmaxHistoryHelp)
      ->capture_default_str();
  cmd->add_option("--fp8-margin", step.fp8_margin, kFp8MarginHelp)->capture_default_str();
  cmd->add_option("--fp8-format", step.fp8_format, kFp8FormatHelp)->capture_default_str();
}

}  // namespace mixprec::tools
