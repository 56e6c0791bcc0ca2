// TrainStep: precision setup and the one training step that every command runs.
#include "mixprec/train/train_step.h"

#include <cmath>
#include <limits>

#include "mixprec/amp/autocast.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/clip_grad.h"
#include "mixprec/optim/param_groups.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::train {

void StepConfig::validate(const char* op) const {
  amp::parse_precision_mode(precision);
  MIXPREC_CHECK(std::isfinite(lr) && lr > 0.0f && lr <= 100.0f, ValueError, op,
                "--lr must be a positive number <= 100, got " << lr);
  MIXPREC_CHECK(optimizer == "sgd" || optimizer == "adam" || optimizer == "adamw", ValueError, op,
                "unknown --optimizer '" << optimizer << "'; choose sgd, adam or adamw");
  MIXPREC_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0f, ValueError, op,
                "--weight-decay must be >= 0, got " << weight_decay);
  optim::DecayExclusions::parse(no_decay);
  MIXPREC_CHECK(std::isfinite(clip) && clip >= 0.0f, ValueError, op,
                "--clip must be >= 0 (0 disables clipping), got " << clip);
  MIXPREC_CHECK(accum >= 1 && accum <= 4096, ValueError, op,
                "--accum must be in [1, 4096], got " << accum);
  MIXPREC_CHECK(scheduler == "none" || scheduler == "cosine", ValueError, op,
                "unknown --scheduler '" << scheduler << "'; choose none or cosine");
  MIXPREC_CHECK(scheduler_steps >= 1, ValueError, op,
                "the schedule must last at least one optimizer step, got " << scheduler_steps);
  MIXPREC_CHECK(loss_scaling == "dynamic" || loss_scaling == "predictive", ValueError, op,
                "unknown --loss-scaling '" << loss_scaling << "'; choose dynamic or predictive");
  MIXPREC_CHECK(scaler_growth_interval >= 1 && scaler_growth_interval <= 1000000000, ValueError, op,
                "--scaler-growth-interval must be in [1, 1000000000] steps, got "
                    << scaler_growth_interval);
}

struct TrainStep::State {
  StepConfig config;
  amp::PrecisionMode mode = amp::PrecisionMode::fp32;
  std::string precision_name, auto_reason;
  amp::PrecisionPolicy policy;
  bool autocast = false;
  DType compute = DType::bf16;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<amp::GradScaler> scaler;
  std::unique_ptr<optim::LRScheduler> scheduler;
};

TrainStep::TrainStep(nn::Module& model, const StepConfig& config) : s_(std::make_unique<State>()) {
  State& s = *s_;
  config.validate("TrainStep");
  s.config = config;
  s.mode = amp::parse_precision_mode(config.precision);
  if (s.mode == amp::PrecisionMode::automatic) {
    const amp::PrecisionChoice choice = amp::choose_precision(cpu_features());
    s.mode = choice.mode;
    s.auto_reason = choice.reason;
  }
  s.precision_name = amp::name(s.mode);
  s.policy = amp::PrecisionPolicy::for_mode(s.mode);
  s.autocast = s.policy.dtypes.compute != DType::f32;
  s.compute = s.autocast ? s.policy.dtypes.compute : DType::bf16;

  amp::apply_parameter_dtypes(model, s.policy);
  optim::OptimizerOptions common;
  common.seed = config.seed;
  if (s.mode == amp::PrecisionMode::pure_bf16_sr) {
    common.master_weights = optim::MasterWeights::none_stochastic_rounding;
  }
  if (config.optimizer == "sgd") {
    s.optimizer = std::make_unique<optim::SGD>(
        model.parameters(),
        optim::SgdOptions{.lr = config.lr, .momentum = 0.9f, .weight_decay = config.weight_decay}, common);
  } else if (config.optimizer == "adam") {
    s.optimizer = std::make_unique<optim::Adam>(
        model.parameters(), optim::AdamOptions{.lr = config.lr, .weight_decay = config.weight_decay}, common);
  } else {
    s.optimizer = std::make_unique<optim::AdamW>(
        model.parameters(), optim::AdamWOptions{.lr = config.lr, .weight_decay = config.weight_decay}, common);
  }
  if (const auto exclude = optim::DecayExclusions::parse(config.no_decay); exclude.any()) {
    s.optimizer->set_param_groups(optim::weight_decay_groups(model, config.weight_decay, exclude));
  }
  s.scaler = std::make_unique<amp::GradScaler>(
      amp::GradScalerOptions{.growth_interval = config.scaler_growth_interval,
                             .enabled = s.mode == amp::PrecisionMode::fp16,
                             .mode = amp::parse_scaling_mode(config.loss_scaling)});
  if (config.scheduler == "cosine") {
    s.scheduler = std::make_unique<optim::CosineAnnealingLR>(*s.optimizer, config.scheduler_steps);
  }
}

TrainStep::~TrainStep() = default;

double TrainStep::accumulate(const std::function<Tensor()>& forward_loss) {
  State& s = *s_;
  Tensor loss;
  {
    amp::Autocast region(s.autocast, s.compute);
    loss = forward_loss();
  }
  const double value = loss.item();
  if (s.config.accum > 1) loss = loss * (1.0f / static_cast<float>(s.config.accum));
  s.scaler->scale(loss).backward();
  return value;
}

float TrainStep::unscale_and_clip() {
  State& s = *s_;
  s.scaler->unscale(*s.optimizer);
  const float bound = s.config.clip > 0 ? s.config.clip : std::numeric_limits<float>::infinity();
  return optim::clip_grad_norm(s.optimizer->params(), bound);
}

bool TrainStep::apply() {
  State& s = *s_;
  const bool applied = s.scaler->step(*s.optimizer);
  s.scaler->update();
  if (s.scheduler) s.scheduler->step();
  s.optimizer->zero_grad();
  return applied;
}

StepOutcome TrainStep::run(const std::function<Tensor()>& forward_loss, double* losses) {
  double sum = 0;
  for (int i = 0; i < s_->config.accum; ++i) sum += accumulate(forward_loss);
  if (losses != nullptr) *losses = sum;
  StepOutcome out;
  out.grad_norm = unscale_and_clip();
  out.applied = apply();
  return out;
}

const StepConfig& TrainStep::config() const { return s_->config; }
amp::PrecisionMode TrainStep::mode() const { return s_->mode; }
const std::string& TrainStep::precision_name() const { return s_->precision_name; }
const std::string& TrainStep::auto_reason() const { return s_->auto_reason; }
const amp::PrecisionPolicy& TrainStep::policy() const { return s_->policy; }
bool TrainStep::autocast() const { return s_->autocast; }
DType TrainStep::compute_dtype() const { return s_->compute; }
optim::Optimizer& TrainStep::optimizer() { return *s_->optimizer; }
amp::GradScaler& TrainStep::scaler() { return *s_->scaler; }
optim::LRScheduler* TrainStep::scheduler() { return s_->scheduler.get(); }

}  // namespace mixprec::train
