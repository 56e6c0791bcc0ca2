// TrainStep: precision setup and the one training step that every command runs.
#include "mixprec/train/train_step.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "mixprec/core/transfer.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "train/step_graphs.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"
#include "mixprec/dist/data_parallel.h"
#include "mixprec/nn/fp8_layers.h"
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
  MIXPREC_CHECK(compute.empty() || compute == "fp16" || compute == "bf16", ValueError, op,
                "unknown --compute '" << compute << "'; choose fp16 or bf16");
  const bool layered = amp::parse_precision_mode(precision) == amp::PrecisionMode::auto_layer;
  MIXPREC_CHECK(layered || compute.empty(), ValueError, op,
                "--compute sets the dtype --precision auto-layer starts its layers in; with --precision "
                    << precision << " drop it");
  MIXPREC_CHECK(layered || amp::is_fp8(amp::parse_precision_mode(precision)) || layer_policy.empty(),
                ValueError, op,
                "--policy replays a per-layer policy of --precision auto-layer (or picks the fp8 "
                "layers of --precision fp8/fp8-delayed); with --precision "
                    << precision << " drop it");
  if (amp::is_fp8(amp::parse_precision_mode(precision))) {
    MIXPREC_CHECK(fp8_amax_history >= 1 && fp8_amax_history <= 100000, ValueError, op,
                  "--fp8-amax-history must be in [1, 100000] steps, got " << fp8_amax_history);
    MIXPREC_CHECK(fp8_margin >= 0 && fp8_margin <= 64, ValueError, op,
                  "--fp8-margin must be in [0, 64], got " << fp8_margin);
    MIXPREC_CHECK(fp8_format == "hybrid" || fp8_format == "e4m3", ValueError, op,
                  "unknown --fp8-format '" << fp8_format << "'; choose hybrid (E4M3 forward, E5M2 "
                                              "gradients) or e4m3");
  }
  dist::parse_wire_dtype(wire_dtype);
  parse_overflow_injection(inject_overflow);
  MIXPREC_CHECK(inject_overflow.empty() || amp::parse_precision_mode(precision) == amp::PrecisionMode::fp16 ||
                    amp::parse_precision_mode(precision) == amp::PrecisionMode::auto_layer,
                ValueError, op,
                "--inject-overflow tests the fp16 GradScaler's step skipping; use it with --precision fp16 "
                "or auto-layer");
  MIXPREC_CHECK(graphs == "on" || graphs == "off", ValueError, op,
                "--cuda-graphs must be on or off, got '" << graphs << "'");
}

OverflowInjection parse_overflow_injection(const std::string& text) {
  OverflowInjection out;
  if (text.empty()) return out;
  const std::size_t at = text.find('@');
  const std::string every = text.substr(0, at), rank = at == std::string::npos ? "" : text.substr(at + 1);
  const auto number = [](const std::string& t, std::int64_t& v) {
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && end == t.data() + t.size();
  };
  std::int64_t r = -1;
  MIXPREC_CHECK(number(every, out.every) && out.every >= 1 && (rank.empty() || (number(rank, r) && r >= 0)),
                ValueError, "--inject-overflow",
                "expects N or N@RANK (an Inf in the gradients every Nth step, N >= 1, on every rank or "
                "on rank RANK only), got '" << text << "'");
  out.rank = static_cast<int>(r);
  return out;
}

struct TrainStep::State {
  // The 16-bit weight copies autocast makes and the optimizer rewrites (first member: it
  // outlives the optimizer, which may hold one of them during an update).
  runtime::WeightCopies weight_copies;
  StepConfig config;
  amp::PrecisionMode mode = amp::PrecisionMode::fp32;
  std::string precision_name, auto_reason;
  amp::PrecisionPolicy policy;
  bool autocast = false;
  DType compute = DType::bf16;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<amp::GradScaler> scaler;
  std::unique_ptr<optim::LRScheduler> scheduler;
  std::unique_ptr<PrecisionAutopilot> autopilot;  // auto-layer
  std::unique_ptr<nn::Fp8Layers> fp8;             // fp8 recipes
  // fp8: the histories and scales as the step found them (copies, then the live tensors), put
  // back when the step is skipped: a skipped step leaves the scales as it leaves the weights.
  std::vector<std::pair<Tensor, Tensor>> fp8_before;
  // Data parallel (comm with several ranks): the gradient exchange, and ZeRO-1's layout.
  const dist::Communicator* comm = nullptr;
  std::vector<Tensor> model_params;
  std::unique_ptr<dist::ShardedParameters> shards;
  std::unique_ptr<dist::GradientSync> sync;
  bool sharded() const { return shards != nullptr; }
  OverflowInjection inject;
  std::int64_t unscales = 0;  // calls of unscale_and_clip, for the injection's period
  int micro = 0;              // micro-batches accumulated since the last unscale_and_clip
  // Whether the step whose unscale_and_clip is the `unscale`-th gets an injected Inf (on some rank).
  bool injects_at(std::int64_t unscale) const { return inject.every > 0 && unscale % inject.every == 0; }
  // loss_gradient()'s tensor and the value it holds (remade when the scale changes).
  Tensor loss_gradient;
  float loss_gradient_value = 0.0f;
  // The clipping coefficient unscale_and_clip measured, which apply()'s optimizer pass multiplies
  // into every gradient (undefined: nothing to clip, or sharded, which clips in place).
  Tensor clip_coef;
  // StepConfig::graphs "on": the captured micro-batches (train/step_graphs.h).
  std::unique_ptr<detail::StepGraphs> graphs;
};

TrainStep::TrainStep(nn::Module& model, const StepConfig& config, const dist::Communicator* comm)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  config.validate("TrainStep");
  s.config = config;
  s.mode = amp::parse_precision_mode(config.precision);
  if (s.mode == amp::PrecisionMode::automatic) {
    const Device device = current_device();
    const amp::PrecisionChoice choice =
        device.type == DeviceType::cuda
            ? amp::choose_precision(gpu_inventory().gpus.at(static_cast<std::size_t>(device.index)))
            : amp::choose_precision(cpu_features());
    s.mode = choice.mode;
    s.auto_reason = choice.reason;
  }
  s.precision_name = amp::name(s.mode);
  s.policy = amp::PrecisionPolicy::for_mode(s.mode);
  if (s.mode == amp::PrecisionMode::auto_layer && !config.compute.empty()) {
    s.policy.dtypes.compute = config.compute == "fp16" ? DType::f16 : DType::bf16;
  }
  s.autocast = s.policy.dtypes.compute != DType::f32;
  s.compute = s.autocast ? s.policy.dtypes.compute : DType::bf16;

  const bool parallel = comm != nullptr && comm->size() > 1;
  MIXPREC_CHECK(!config.shard_optimizer || parallel, ValueError, "TrainStep",
                "--shard-optimizer splits the optimizer state among the ranks of an MPI job, but "
                "this process runs alone; start it with `mpirun -np N mixprec train ...` (N >= 2, "
                "mixprec built with MPI: see `mixprec env`) or drop the flag");
  MIXPREC_CHECK(!parallel || (s.mode != amp::PrecisionMode::pure_bf16 &&
                              s.mode != amp::PrecisionMode::pure_bf16_sr),
                ValueError, "TrainStep",
                "--precision " << s.precision_name << " keeps 16-bit gradients, which data-parallel "
                               << "runs do not average yet; use fp32, bf16 or fp16 with several ranks");

  amp::apply_parameter_dtypes(model, s.policy);
  if (s.mode == amp::PrecisionMode::auto_layer) {
    s.autopilot = std::make_unique<PrecisionAutopilot>(model, model.type_name(), s.policy.dtypes.compute);
    if (parallel) s.autopilot->combine_over(*comm);
    if (!config.layer_policy.empty()) {
      s.autopilot->replay(LayerPolicy::read(config.layer_policy), config.layer_policy);
    }
  }
  if (amp::is_fp8(s.mode)) {
    if (const Device device = current_device(); device.type == DeviceType::cuda) {
      const std::string refusal =
          amp::fp8_refusal(gpu_inventory().gpus.at(static_cast<std::size_t>(device.index)));
      MIXPREC_CHECK(refusal.empty(), ValueError, "TrainStep",
                    "--precision " << s.precision_name << ": " << refusal);
    }
    runtime::Fp8Recipe recipe;
    recipe.scaling = s.mode == amp::PrecisionMode::fp8 ? runtime::Fp8Scaling::current : runtime::Fp8Scaling::delayed;
    recipe.amax_history = config.fp8_amax_history;
    recipe.margin = config.fp8_margin;
    recipe.formats = runtime::parse_fp8_formats(config.fp8_format);
    // A policy file's entries override the default fp8 layers: "fp8" puts a Linear in, any other
    // dtype keeps it out (it runs the plain Linear under the run's bf16 autocast).
    std::map<std::string, bool> overrides;
    if (!config.layer_policy.empty()) {
      for (const auto& [path, dtype] : LayerPolicy::read(config.layer_policy).layers) {
        overrides[path] = dtype == DType::f8e4m3;
      }
    }
    s.fp8 = std::make_unique<nn::Fp8Layers>(model, recipe, overrides,
                                            "policy file '" + config.layer_policy + "'");
  }
  s.model_params = model.parameters();
  s.inject = parse_overflow_injection(config.inject_overflow);
  std::vector<Tensor> updated = s.model_params;
  if (parallel) {
    s.comm = comm;
    if (config.shard_optimizer) {
      s.shards = std::make_unique<dist::ShardedParameters>(*comm, s.model_params);
      updated = s.shards->views();
    }
    s.sync = std::make_unique<dist::GradientSync>(*comm, s.model_params,
                                                  dist::parse_wire_dtype(config.wire_dtype), s.shards.get());
  }
  optim::OptimizerOptions common;
  common.seed = config.seed;
  if (s.mode == amp::PrecisionMode::pure_bf16_sr) {
    common.master_weights = optim::MasterWeights::none_stochastic_rounding;
  }
  if (config.optimizer == "sgd") {
    s.optimizer = std::make_unique<optim::SGD>(
        updated,
        optim::SgdOptions{.lr = config.lr, .momentum = 0.9f, .weight_decay = config.weight_decay}, common);
  } else if (config.optimizer == "adam") {
    s.optimizer = std::make_unique<optim::Adam>(
        updated, optim::AdamOptions{.lr = config.lr, .weight_decay = config.weight_decay}, common);
  } else {
    s.optimizer = std::make_unique<optim::AdamW>(
        updated, optim::AdamWOptions{.lr = config.lr, .weight_decay = config.weight_decay}, common);
  }
  if (const auto exclude = optim::DecayExclusions::parse(config.no_decay); exclude.any()) {
    std::vector<optim::ParamGroup> groups = optim::weight_decay_groups(model, config.weight_decay, exclude);
    s.optimizer->set_param_groups(s.sharded() ? s.shards->local_groups(groups) : groups);
  }
  // fp8: a scaler pinned at scale 1, for its step skipping alone (an fp8 cast that met a NaN or
  // Inf amax joins its found-inf in unscale_and_clip): the per-tensor fp8 scales already do
  // what a loss scale would.
  const bool fp8 = amp::is_fp8(s.mode);
  s.scaler = std::make_unique<amp::GradScaler>(
      amp::GradScalerOptions{.init_scale = fp8 ? 1.0 : 65536.0,
                             .growth_interval = config.scaler_growth_interval,
                             // auto-layer: any layer may compute in fp16.
                             .enabled = s.mode == amp::PrecisionMode::fp16 ||
                                        s.mode == amp::PrecisionMode::auto_layer || fp8,
                             .min_scale = fp8 ? 1.0 : 0.0,
                             .max_scale = fp8 ? 1.0 : std::numeric_limits<double>::infinity(),
                             .mode = amp::parse_scaling_mode(config.loss_scaling)});
  if (config.scheduler == "cosine") {
    s.scheduler = std::make_unique<optim::CosineAnnealingLR>(*s.optimizer, config.scheduler_steps);
  }
  if (config.graphs == "on") {
    const Device device = current_device();
    MIXPREC_CHECK(device.type == DeviceType::cuda || device.type == DeviceType::devsim, ValueError,
                  "TrainStep",
                  "--cuda-graphs on captures the step on a GPU: add --device cuda (or --device "
                  "devsim, which emulates the capture); this run is on " << to_string(device));
    // What rules a graph out for the whole run; a capture that fails later says its own why.
    std::string refusal;
    if (s.fp8) {
      refusal = "fp8 recipes keep their scaling state on the host between micro-batches";
    } else if (s.autopilot) {
      refusal = "auto-layer moves layers between dtypes, which changes the captured work";
    } else if (parallel) {
      refusal = "data parallel runs exchange gradients with MPI during the backward";
    }
    s.graphs = std::make_unique<detail::StepGraphs>(refusal);
  }
}

TrainStep::~TrainStep() = default;

// accumulate()'s forward half: the loss under this step's autocast state (and the fp8 state
// saved before the step's first micro-batch).
Tensor TrainStep::forward(const std::function<Tensor()>& forward_loss) {
  State& s = *s_;
  const runtime::UseWeightCopies copies(s.weight_copies);
  if (s.fp8 && s.micro == 0) {
    // Device copies of a few floats per layer: no host read.
    s.fp8_before.clear();
    for (const auto& [name, t] : s.fp8->state_tensors()) {
      if (name.ends_with("_history") || name.ends_with("_scale")) s.fp8_before.emplace_back(t.clone(), t);
    }
  }
  runtime::Autocast region(s.autocast, s.compute);
  std::optional<nn::ForwardObserverScope> watch;
  if (s.autopilot && s.autopilot->sampling()) watch.emplace(s.autopilot->observer());
  std::optional<nn::Fp8Scope> fp8;  // backward needs no scope: each fp8 node keeps its state
  if (s.fp8) fp8.emplace(*s.fp8);
  return forward_loss();
}

// accumulate()'s backward half: (loss / accum), scaled, back-propagated with autocast off.
void TrainStep::backward(Tensor loss) {
  State& s = *s_;
  const runtime::UseWeightCopies copies(s.weight_copies);  // recomputation reuses them too
  if (s.config.accum > 1) loss = loss * (1.0f / static_cast<float>(s.config.accum));
  // Data parallel: the last micro-batch's gradients are final, so buckets may leave during its
  // backward. Not on a step that injects an overflow: the Inf is written after backward and must
  // travel with the rest.
  if (s.sync && s.micro == s.config.accum - 1 && !s.injects_at(s.unscales + 1)) s.sync->arm();
  s.scaler->scale(loss).backward();
  ++s.micro;
}

double TrainStep::accumulate(const std::function<Tensor()>& forward_loss) {
  const Tensor loss = forward(forward_loss);
  const TransferReason why("loss for the log");
  const double value = loss.item();
  backward(loss);
  return value;
}

Tensor TrainStep::forward_backward(const std::function<Tensor()>& forward_loss) {
  const Tensor loss = forward(forward_loss);
  backward(loss);
  return loss;
}

Tensor TrainStep::loss_gradient() {
  State& s = *s_;
  // The products accumulate()'s backward computes, in its order, each an f32 affine backward
  // (dy * alpha + 0: one rounding, then an exact +0): the seed 1, times the scaler's f32
  // scale (GradScaler::scale's affine; none when the scaler is off), times 1/accum (the
  // division's affine; none for one micro-batch). Host f32 arithmetic gives the kernels' bits.
  float g = 1.0f;
  if (s.scaler->is_enabled()) g = g * static_cast<float>(s.scaler->get_scale()) + 0.0f;
  if (s.config.accum > 1) g = g * (1.0f / static_cast<float>(s.config.accum)) + 0.0f;
  if (!s.loss_gradient.defined() || s.loss_gradient.device() != current_device() ||
      std::memcmp(&g, &s.loss_gradient_value, sizeof g) != 0) {
    s.loss_gradient = Tensor::full({}, g);  // a fill on the device: no transfer
    s.loss_gradient_value = g;
  }
  return s.loss_gradient;
}

Tensor TrainStep::unscale_and_clip() {
  State& s = *s_;
  // Averaged before unscaling: every rank then holds the same scaled gradients (or, sharded,
  // its share of them), so the Inf/NaN check below agrees across ranks.
  ++s.unscales;
  s.micro = 0;
  if (s.injects_at(s.unscales) && (s.inject.rank < 0 || s.inject.rank == (s.comm ? s.comm->rank() : 0))) {
    for (const Tensor& p : s.model_params) {
      const Tensor g = p.grad();
      if (!g.defined() || g.numel() == 0) continue;
      MIXPREC_ASSERT(g.dtype() == DType::f32 && g.is_contiguous());
      // Written where the gradient lives (a one-element fill), not through a host pointer.
      kernels::fill(g.data_ptr(), DType::f32, 1, std::numeric_limits<float>::infinity());
      g.bump_version();
      break;
    }
  }
  if (s.sync) s.sync->average();
  s.scaler->unscale(*s.optimizer);
  // fp8: a NaN/Inf amax met by any cast of this step's forward or backward skips the step as an
  // Inf gradient does (a saturating cast turns an Inf into a finite max, so the gradients alone
  // would not show it). One flag read per step, as the scaler's own.
  const bool fp8_found = s.fp8 != nullptr && s.fp8->take_found_inf();
  if (s.fp8 && !s.sharded()) {
    s.scaler->combine_across_processes(*s.optimizer, [&](bool found, float amax) {
      return std::make_pair(found || fp8_found, amax);
    });
  }
  const float bound = s.config.clip > 0 ? s.config.clip : std::numeric_limits<float>::infinity();
  if (!s.sharded()) {
    optim::ClipCoefficient clip = optim::clip_grad_norm_coefficient(s.optimizer->params(), bound);
    s.clip_coef = std::move(clip.coef);
    return clip.total;
  }
  // Sharded: each rank checked and measures only its share; the job's verdict and norm are
  // the maximum and the sum over the ranks.
  const dist::Communicator& comm = *s.comm;
  s.scaler->combine_across_processes(*s.optimizer, [&](bool found, float amax) {
    const double any = comm.allreduce_max(found || fp8_found ? 1.0 : 0.0);
    return std::make_pair(any != 0.0, static_cast<float>(comm.allreduce_max(amax)));
  });
  const float norm = optim::clip_grad_norm(s.optimizer->params(), bound, 2.0f, false,
                                           [&](double squares) { return comm.allreduce_sum(squares); });
  return Tensor::full({}, norm);
}

bool TrainStep::apply() {
  State& s = *s_;
  const runtime::UseWeightCopies copies(s.weight_copies);  // the optimizer rewrites them
  // The step's index counts skipped steps (what max_steps counts); the scale is the one its
  // backward ran at.
  const std::int64_t step = s.optimizer->steps() + s.scaler->stats().skipped_steps;
  const double scale = s.scaler->get_scale();
  const bool applied = s.scaler->step(*s.optimizer, s.clip_coef);
  s.clip_coef = Tensor();
  if (!applied) {
    // fp8: a role whose amax was NaN/Inf kept its history and scale; the others of the skipped
    // step pushed theirs: put them all back.
    for (const auto& [saved, live] : s.fp8_before) {
      kernels::copy(live.shape(), {saved.data_ptr(), saved.dtype(), saved.strides()},
                    {live.data_ptr(), live.dtype(), live.strides()});
    }
  }
  s.fp8_before.clear();
  // Every rank made the same decision (agreed found-inf), so all or none gather.
  if (s.sharded() && applied) s.shards->gather_parameters(s.sync->bucket());
  s.scaler->update();
  if (s.scheduler) s.scheduler->step();
  s.optimizer->zero_grad();
  if (s.sharded()) {
    for (const Tensor& p : s.model_params) p.set_grad(Tensor());
  }
  if (s.autopilot) s.autopilot->end_step(step, applied, scale);
  return applied;
}

Tensor TrainStep::forward_backward(const data::Batch& batch, const BatchLoss& loss_of) {
  State& s = *s_;
  const auto eager = [&](const data::Batch& b) { return forward_backward([&] { return loss_of(b); }); };
  if (!s.graphs) return eager(batch);
  const int micro_before = s.micro;
  detail::StepGraphs::Hooks hooks;
  hooks.forward_backward = eager;
  hooks.undo_failed_capture = [&] {
    // The capture ran nothing: the weight copies it may have published hold no values (the
    // gradients StepGraphs puts back itself). Back to the state before the micro-batch.
    s.weight_copies.clear();
    s.micro = micro_before;
  };
  // The host values the captured work depends on besides the shapes: the loss scale (the scaled
  // backward's first product, the fused loss's promised gradient).
  double scale = s.scaler->is_enabled() ? s.scaler->get_scale() : 1.0;
  std::uint64_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  bool replayed = false;
  Tensor loss = s.graphs->run(batch, scale_bits, s.micro, s.model_params, hooks, &replayed);
  if (replayed) ++s.micro;  // the bookkeeping backward() does on the host
  return loss;
}

double TrainStep::accumulate(const data::Batch& batch, const BatchLoss& loss_of) {
  const Tensor loss = forward_backward(batch, loss_of);
  const TransferReason why("loss for the log");
  return loss.item();
}

StepOutcome TrainStep::run(const data::Batch& batch, const BatchLoss& loss_of, double* losses) {
  double sum = 0;
  for (int i = 0; i < s_->config.accum; ++i) sum += accumulate(batch, loss_of);
  if (losses != nullptr) *losses = sum;
  StepOutcome out;
  out.grad_norm = unscale_and_clip();
  out.applied = apply();
  return out;
}

TrainStep::GraphStats TrainStep::graph_stats() const {
  GraphStats g;
  if (!s_->graphs) return g;
  g.captures = s_->graphs->captures();
  g.replays = s_->graphs->replays();
  g.refusal = s_->graphs->refusal();
  return g;
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
const dist::ShardedParameters* TrainStep::shards() const { return s_->shards.get(); }
std::size_t TrainStep::gradient_buckets() const { return s_->sync ? s_->sync->bucket_count() : 0; }

optim::OptimizerState TrainStep::full_optimizer_state() const {
  return s_->sharded() ? s_->shards->gather_state(*s_->optimizer) : s_->optimizer->state();
}

std::vector<std::string> TrainStep::full_optimizer_tensor_names() const {
  if (s_->sharded()) return s_->shards->full_tensor_names(*s_->optimizer);
  std::vector<std::string> names;
  for (const auto& [name, t] : s_->optimizer->state_tensors()) names.push_back(name);
  return names;
}

void TrainStep::load_full_optimizer_state(const optim::OptimizerState& state) {
  if (s_->sharded()) {
    s_->shards->load_state(*s_->optimizer, state);
  } else {
    s_->optimizer->load_state(state);
  }
}
amp::GradScaler& TrainStep::scaler() { return *s_->scaler; }
runtime::WeightCopies& TrainStep::weight_copies() { return s_->weight_copies; }
optim::LRScheduler* TrainStep::scheduler() { return s_->scheduler.get(); }
PrecisionAutopilot* TrainStep::autopilot() { return s_->autopilot.get(); }
nn::Fp8Layers* TrainStep::fp8_layers() { return s_->fp8.get(); }
const PrecisionAutopilot* TrainStep::autopilot() const { return s_->autopilot.get(); }

}  // namespace mixprec::train
