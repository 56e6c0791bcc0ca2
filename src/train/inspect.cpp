// `mixprec inspect`, the run: a ForwardObserver that records each leaf module's output and
// wraps it in an identity op whose backward records the output's gradient, around the
// Trainer's step; parameter gradients and updates are read between the step's phases.
#include "mixprec/train/inspect.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>

#include "mixprec/core/transfer.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/precision.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/core/memory.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/data/dataloader.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/idx.h"
#include "mixprec/data/synthetic.h"
#include "mixprec/models/zoo.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/optim/adam.h"
#include "mixprec/train/train_step.h"

namespace mixprec::train {
namespace {

constexpr const char* kOp = "inspect";

// Collects the per-layer statistics; one LayerReport per leaf module, in order of first run.
class Recorder final : public nn::ForwardObserver {
 public:
  double loss_scale = 1.0;  // the scale of the backward about to run (1 without a scaler)
  bool scaling = false;     // a GradScaler is enabled: also record gradients as scaled
  std::vector<LayerReport> layers;
  std::unordered_map<const nn::Module*, std::size_t> index;

  Tensor on_leaf_forward(nn::Module& module, const Tensor& /*input*/, const Tensor& output) override {
    auto [it, inserted] = index.try_emplace(&module, layers.size());
    if (inserted) {
      LayerReport l;
      l.path = module.path();
      l.type = module.type_name();
      for (const auto& [n, p] : module.local_parameters()) l.parameters += p.numel();
      layers.push_back(std::move(l));
    }
    LayerReport& l = layers[it->second];
    l.output_shape = output.shape();
    l.activation.add(output);
    const std::size_t layer = it->second;
    return runtime::observe_gradient(output, [this, layer](const Tensor& g) { record_output_grad(layer, g); });
  }

  void record_output_grad(std::size_t layer, const Tensor& g) {
    layers[layer].output_grad.add(g, 1.0 / loss_scale);
    if (scaling) layers[layer].output_grad_scaled.add(g, 1.0);
  }
};

// Leaf modules of m (m itself if it has no children), depth first in registration order.
void collect_leaves(const nn::Module& m, std::vector<const nn::Module*>& out) {
  if (m.children().empty()) {
    out.push_back(&m);
    return;
  }
  for (const auto& [name, child] : m.children()) collect_leaves(*child, out);
}

// The f32 values a parameter's update is measured on: its fp32 master if it has one, else the
// parameter itself (f32 parameters, and pure-bf16-sr's bf16 ones).
std::vector<float> master_values(const optim::Optimizer& opt, std::size_t i) {
  const Tensor& master = opt.master(i);
  const TransferReason why("inspect weights");
  return master.defined() ? master.to_vector() : opt.params()[i].to_vector();
}

// The latest amax, history and scale of every fp8 role, and the largest fractions so far.
void merge_fp8(std::vector<nn::Fp8LayerReport>& into, std::vector<nn::Fp8LayerReport> latest) {
  if (into.size() == latest.size()) {
    for (std::size_t l = 0; l < latest.size(); ++l) {
      for (std::size_t r = 0; r < latest[l].roles.size(); ++r) {
        nn::Fp8RoleReport& now = latest[l].roles[r];
        const nn::Fp8RoleReport& was = into[l].roles[r];
        now.saturated = std::max(now.saturated, was.saturated);
        now.flushed = std::max(now.flushed, was.flushed);
        now.observed = now.observed || was.observed;
      }
    }
  }
  into = std::move(latest);
}

void check_batch(const InspectBatch& b, int step) {
  MIXPREC_CHECK(b.inputs.defined() && b.inputs.dim() >= 1 && b.inputs.size(0) >= 1, ValueError, kOp,
                "batch " << step << " has no inputs: give a tensor [B, ...] with B >= 1");
  MIXPREC_CHECK(static_cast<std::int64_t>(b.targets.size()) == b.inputs.size(0), ValueError, kOp,
                "batch " << step << " has " << b.inputs.size(0) << " inputs but "
                         << b.targets.size() << " targets");
}

}  // namespace

InspectReport inspect_training(nn::Module& model,
                               const std::function<InspectBatch(int step)>& next_batch,
                               const InspectConfig& config) {
  MIXPREC_CHECK(config.steps >= 1 && config.steps <= 10000, ValueError, kOp,
                "--steps must be in [1, 10000], got " << config.steps);
  MIXPREC_CHECK(std::isfinite(config.lr) && config.lr > 0, ValueError, kOp,
                "the learning rate must be a positive number, got " << config.lr);
  const VerdictThresholds& th = config.thresholds;
  MIXPREC_CHECK(th.overflow >= 0 && th.overflow < 1 && th.underflow >= 0 && th.underflow < 1 &&
                    th.lost_updates >= 0 && th.lost_updates < 1,
                ValueError, kOp, "verdict thresholds must be fractions in [0, 1)");
  // The training step is the Trainer's own (Adam, no clipping, no schedule); the probes only
  // watch it.
  train::TrainStep train_step(model, train::StepConfig{.precision = config.precision, .optimizer = "adam",
                                                 .lr = config.lr, .scheduler = "none",
                                                 .seed = config.seed});
  const bool autocast = train_step.autocast();
  const DType compute = train_step.compute_dtype();

  InspectReport report;
  report.model = "custom";
  report.data = "custom";
  report.precision = train_step.precision_name();
  report.steps = config.steps;
  report.seed = config.seed;
  report.threads = num_threads();
  report.lr = config.lr;
  report.thresholds = config.thresholds;
  report.parameter_count = model.parameter_count();
  report.memory = memory_model();

  optim::Optimizer& opt = train_step.optimizer();
  amp::GradScaler& scaler = train_step.scaler();

  // Which leaf module owns each of the optimizer's parameters.
  std::vector<const nn::Module*> leaves;
  collect_leaves(model, leaves);
  std::map<const detail::TensorImpl*, const nn::Module*> owner_of;
  for (const nn::Module* leaf : leaves) {
    for (const auto& [n, p] : leaf->local_parameters()) owner_of[p.impl_ptr().get()] = leaf;
  }
  const std::vector<Tensor>& params = opt.params();

  Recorder rec;
  rec.scaling = scaler.is_enabled();
  // fp8 runs: count every cast's saturated and flushed elements (a few steps: the cost is fine).
  nn::Fp8Layers* const fp8 = train_step.fp8_layers();
  if (fp8 != nullptr) fp8->set_observe(true);
  model.train();
  for (int step = 0; step < config.steps; ++step) {
    const InspectBatch batch = next_batch(step);
    check_batch(batch, step);
    if (step == 0) {
      report.batch_size = batch.inputs.size(0);
      report.alignment = alignment_warnings(model, report.batch_size, autocast && compute == DType::bf16);
    }
    rec.loss_scale = scaler.get_scale();
    report.loss_scales.push_back(rec.loss_scale);

    const std::size_t activations_before = memory_stats().current_of(MemoryCategory::activation);
    reset_peak_memory();
    report.losses.push_back(train_step.accumulate([&] {
      nn::ForwardObserverScope observe(&rec);
      return cross_entropy(model(batch.inputs), batch.targets);
    }));
    const MemoryStats mem = memory_stats();
    const std::size_t act_peak = mem.peak_of(MemoryCategory::activation);
    report.measured.activation_peak = std::max(
        report.measured.activation_peak, act_peak > activations_before ? act_peak - activations_before : 0);
    if (report.parameter_count > 0) {
      report.measured.persistent_per_parameter =
          static_cast<double>(mem.current_of(MemoryCategory::parameter) +
                              mem.current_of(MemoryCategory::gradient) +
                              mem.current_of(MemoryCategory::optimizer_state)) /
          static_cast<double>(report.parameter_count);
    }

    train_step.unscale_and_clip();
    std::vector<LayerReport*> owner_layer(params.size(), nullptr);
    std::vector<std::vector<float>> before(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto o = owner_of.find(params[i].impl_ptr().get());
      if (o == owner_of.end()) continue;  // a parameter of a module with children: not a layer
      auto l = rec.index.find(o->second);
      if (l == rec.index.end()) continue;  // its module never ran
      LayerReport& layer = rec.layers[l->second];
      owner_layer[i] = &layer;
      const Tensor g = params[i].grad();
      if (g.defined()) {
        layer.weight_grad.add(g, 1.0);
        if (rec.scaling) layer.weight_grad_scaled.add(g, rec.loss_scale);
      }
      before[i] = master_values(opt, i);
    }
    const bool stepped = train_step.apply();
    if (fp8 != nullptr) merge_fp8(report.fp8, fp8->report());
    if (!stepped) {
      ++report.skipped_steps;
    } else {
      const double f32_max = traits(DType::f32).max;
      std::vector<double> dw;
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (owner_layer[i] == nullptr) continue;
        const std::vector<float> after = master_values(opt, i);
        dw.resize(after.size());
        for (std::size_t j = 0; j < after.size(); ++j) {
          dw[j] = static_cast<double>(after[j]) - static_cast<double>(before[i][j]);
          owner_layer[i]->weight_update.add(dw[j], 1.0, f32_max);
        }
        owner_layer[i]->lost_updates.add(before[i], dw);
      }
    }
  }
  report.loss_scaling = scaler.is_enabled();

  double grad_amax = 0;
  for (const LayerReport& l : rec.layers) {
    grad_amax = std::max({grad_amax, l.output_grad.amax, l.weight_grad.amax});
  }
  report.reference_scale_log2 = reference_scale_log2(grad_amax);
  for (LayerReport& l : rec.layers) {
    l.fp16_grad_underflow_at_reference = std::max(
        l.output_grad.underflow_fraction_at_scale(numerics::Format::fp16, report.reference_scale_log2),
        l.weight_grad.underflow_fraction_at_scale(numerics::Format::fp16, report.reference_scale_log2));
    VerdictResult v = decide_verdict(l, report.reference_scale_log2, config.thresholds);
    l.verdict = v.verdict;
    l.reason = std::move(v.reason);
  }
  report.layers = std::move(rec.layers);
  return report;
}

InspectReport inspect_builtin(const InspectOptions& o) {
  const models::ModelSpec& spec = models::model_spec(o.model);
  amp::parse_precision_mode(o.precision);  // an unknown name fails before any data is read
  MIXPREC_CHECK(o.steps >= 1 && o.steps <= 10000, ValueError, kOp,
                "--steps must be in [1, 10000], got " << o.steps);
  MIXPREC_CHECK(o.batch_size >= 1 && o.batch_size <= 65536, ValueError, kOp,
                "--batch-size must be in [1, 65536], got " << o.batch_size);
  // Only the samples the steps use are read (wrapping around if the set is smaller).
  const std::int64_t wanted = static_cast<std::int64_t>(o.steps) * o.batch_size;
  data::Dataset train;
  // The model is built with its default sizes (make_model below): resnet50's 224x224 images.
  models::ModelOptions defaults;
  defaults.seed = o.seed;
  const std::vector<std::int64_t> shape = models::input_shape(spec, models::resolve_options(spec, defaults));
  if (spec.synthetic_data) {
    // As many samples as the Trainer's synthetic set at most (8192), but at least one batch.
    const std::int64_t n = std::max(o.batch_size, std::min<std::int64_t>(wanted, 8192));
    std::int64_t features = 1;
    for (const std::int64_t dim : shape) features *= dim;
    train = data::make_synthetic(n, features, spec.num_classes, o.seed, 0);
  } else {
    const std::string dir = o.data_dir.empty() ? data::kFashionMnistDefaultDir : o.data_dir;
    train = data::load_fashion_mnist(dir, true, wanted);
    data::check_finite(train, "training data in " + dir);
  }
  data::check_labels(train, spec.num_classes, "training labels");
  data::DataLoaderOptions lo;
  lo.batch_size = o.batch_size;
  lo.seed = o.seed;
  lo.prefetch = false;
  data::DataLoader loader(train, lo, shape);
  std::int64_t epoch = 0;
  loader.start_epoch(epoch);
  auto next = [&](int) {
    data::Batch b;
    if (!loader.next(b)) {
      loader.start_epoch(++epoch);
      loader.next(b);
    }
    return InspectBatch{b.inputs, b.targets};
  };

  std::shared_ptr<nn::Module> model = models::make_model(spec.name, o.seed);
  InspectConfig config;
  config.precision = o.precision;
  config.steps = o.steps;
  config.seed = o.seed;
  config.thresholds = o.thresholds;
  InspectReport report = inspect_training(*model, next, config);
  report.model = spec.name;
  report.data = spec.synthetic_data ? "synthetic" : "fashion-mnist";
  return report;
}

}  // namespace mixprec::train
