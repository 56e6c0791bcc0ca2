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
}

}  // namespace mixprec::tools
