#include "mixprec/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/precision.h"
#include "mixprec/autograd/anomaly.h"
#include "mixprec/autograd/node.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/core/runtime.h"
#include "mixprec/data/dataloader.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/idx.h"
#include "mixprec/data/synthetic.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/models/zoo.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/clip_grad.h"
#include "mixprec/optim/sgd.h"
#include "train/config_json.h"
#include "train/progress.h"
#include "train/train_checkpoint.h"

namespace mixprec::train {
namespace {

using nlohmann::json;
constexpr const char* kOp = "train";
constexpr std::int64_t kEvalBatch = 1000;
constexpr std::int64_t kSyntheticTrain = 8192, kSyntheticTest = 2048;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Train and test data for a model: Fashion-MNIST, or the synthetic set of the seeds' MLP.
std::pair<data::Dataset, data::Dataset> load_data(const models::ModelSpec& spec,
                                                   const TrainConfig& c) {
  if (spec.synthetic_data) {
    const std::int64_t features = spec.sample_shape[0];
    return {data::make_synthetic(c.limit_train > 0 ? c.limit_train : kSyntheticTrain, features,
                                 spec.num_classes, c.seed, 0),
            data::make_synthetic(c.limit_test > 0 ? c.limit_test : kSyntheticTest, features,
                                 spec.num_classes, c.seed, 1)};
  }
  const std::string dir = c.data_dir.empty() ? data::kFashionMnistDefaultDir : c.data_dir;
  data::Dataset train = data::load_fashion_mnist(dir, true, c.limit_train);
  data::Dataset test = data::load_fashion_mnist(dir, false, c.limit_test);
  data::check_finite(train, "training data in " + dir);
  data::check_finite(test, "test data in " + dir);
  return {std::move(train), std::move(test)};
}

Shape batch_shape(std::int64_t n, const std::vector<std::int64_t>& sample_shape) {
  Shape s{n};
  s.insert(s.end(), sample_shape.begin(), sample_shape.end());
  return s;
}

}  // namespace

struct Trainer::State {
  TrainConfig config;
  models::ModelSpec spec;
  data::Dataset train, test;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<data::DataLoader> loader;
  std::unique_ptr<TrainStep> step;  // precision, optimizer, scaler, schedule: the one step
  std::vector<EpochMetrics> history;
  int next_epoch = 1;
  std::string resumed_from;
  json log_header;

  detail::TrainingObjects objects() {
    return {model.get(), &step->optimizer(), &step->scaler(), step->scheduler()};
  }
  std::int64_t steps_per_epoch() const {
    return (loader->batches_per_epoch() + config.accum - 1) / config.accum;
  }
};

Trainer::Trainer(TrainConfig config) : s_(std::make_unique<State>()) {
  State& s = *s_;
  config.validate();
  s.config = std::move(config);
  const TrainConfig& c = s.config;
  if (c.threads > 0) set_num_threads(c.threads);
  s.spec = models::model_spec(c.model);

  std::tie(s.train, s.test) = load_data(s.spec, c);
  data::check_labels(s.train, s.spec.num_classes, "training labels");
  data::check_labels(s.test, s.spec.num_classes, "test labels");

  s.model = models::make_model(c.model, c.seed);
  data::DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.seed = c.seed;
  s.loader = std::make_unique<data::DataLoader>(s.train, lo, s.spec.sample_shape);
  s.step = std::make_unique<TrainStep>(
      *s.model, c.step_config(std::max<std::int64_t>(1, s.steps_per_epoch() * c.epochs)));
  if (!s.step->auto_reason().empty()) s.log_header["auto_precision_reason"] = s.step->auto_reason();

  if (!c.resume.empty()) {
    const std::string path = io::resolve_checkpoint(c.resume);
    const io::CheckpointFiles files = io::load_checkpoint(path);
    detail::CheckpointHeader h = detail::read_checkpoint_header(files, path);
    const std::string diff = detail::first_incompatibility(h.config, c);
    MIXPREC_CHECK(diff.empty(), ValueError, kOp,
                  "cannot resume from '" << path << "': it was written by a different run ("
                                         << diff << ")");
    MIXPREC_CHECK(h.epoch < c.epochs, ValueError, kOp,
                  "checkpoint '" << path << "' already completed epoch " << h.epoch
                                 << " of a run asked to stop after " << c.epochs
                                 << "; pass a larger --epochs to train further");
    detail::restore_checkpoint(files, path, s.objects());
    s.history = std::move(h.history);
    s.next_epoch = h.epoch + 1;
    s.resumed_from = path;
  }

  json& hdr = s.log_header;
  hdr["type"] = "header";
  hdr["config"] = detail::config_to_json(c);
  hdr["precision_resolved"] = s.step->precision_name();
  hdr["policy"] = s.step->policy().to_string();
  hdr["model"] = {{"name", s.spec.name}, {"description", s.spec.description},
                  {"parameters", s.model->parameter_count()}};
  hdr["data"] = {{"train_samples", s.train.labels.size()}, {"test_samples", s.test.labels.size()},
                 {"source", s.spec.synthetic_data ? "synthetic" : "fashion-mnist"}};
  hdr["hardware"] = {{"cpu", cpu_features().to_string()}, {"max_isa", name(max_isa())},
                     {"onednn", onednn_description()}, {"threads", num_threads()}};
  hdr["started"] = utc_now();
  hdr["resumed_from"] = s.resumed_from.empty() ? json(nullptr) : json(s.resumed_from);
}

Trainer::~Trainer() = default;

const TrainConfig& Trainer::config() const { return s_->config; }
const std::string& Trainer::resolved_precision() const { return s_->step->precision_name(); }
nn::Module& Trainer::model() { return *s_->model; }
int Trainer::next_epoch() const { return s_->next_epoch; }

ConfusionMatrix Trainer::evaluate(double* mean_loss) {
  State& s = *s_;
  autograd::NoGradGuard no_grad;
  s.model->eval();
  amp::Autocast region(s.step->autocast(), s.step->compute_dtype());
  ConfusionMatrix cm(s.spec.num_classes);
  const auto n = static_cast<std::int64_t>(s.test.labels.size());
  double loss_sum = 0;
  for (std::int64_t begin = 0; begin < n; begin += kEvalBatch) {
    const std::int64_t end = std::min(n, begin + kEvalBatch);
    const Tensor x = s.test.images.slice(0, begin, end).reshape(batch_shape(end - begin, s.spec.sample_shape));
    const std::vector<std::int64_t> y(s.test.labels.begin() + begin, s.test.labels.begin() + end);
    const Tensor logits = (*s.model)(x);
    loss_sum += static_cast<double>(cross_entropy(logits, y).item()) * static_cast<double>(end - begin);
    cm.add_logits(logits, y);
  }
  s.model->train();
  if (mean_loss != nullptr) *mean_loss = loss_sum / static_cast<double>(n);
  return cm;
}

std::vector<EpochMetrics> Trainer::run() {
  State& s = *s_;
  const TrainConfig& c = s.config;
  if (on_message) {
    if (s.log_header.contains("auto_precision_reason")) {
      on_message("auto precision: " + s.log_header["auto_precision_reason"].get<std::string>());
    }
    const std::string warnings =
        amp::precision_warnings(s.step->mode(), s.step->scaler().is_enabled(), cpu_features());
    if (!warnings.empty()) on_message(warnings);
  }
  autograd::DetectAnomaly anomaly(c.detect_anomaly);
  amp::GradScaler& scaler = s.step->scaler();
  optim::Optimizer& optimizer = s.step->optimizer();
  s.model->train();
  for (int epoch = s.next_epoch; epoch <= c.epochs; ++epoch) {
    reset_peak_memory();
    EpochMetrics m;
    m.epoch = epoch;
    const std::int64_t skipped_before = scaler.stats().skipped_steps;
    s.loader->start_epoch(epoch - 1);
    detail::ProgressBar bar(c.progress, "epoch " + std::to_string(epoch) + "/" + std::to_string(c.epochs),
                            s.loader->batches_per_epoch());
    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0, norm_sum = 0;
    std::int64_t micro = 0, norms = 0, samples = 0;
    data::Batch batch;
    bool more = s.loader->next(batch);
    while (more) {
      // One optimizer step over up to `accum` micro-batches (the epoch's last step may have fewer).
      int in_step = 0;
      autograd::set_anomaly_step(optimizer.steps());
      while (more && in_step < c.accum) {
        const double value = s.step->accumulate(
            [&] { return cross_entropy((*s.model)(batch.inputs), batch.targets); });
        MIXPREC_CHECK(std::isfinite(value) || scaler.is_enabled(), ValueError, kOp,
                      "the loss became " << value << " at epoch " << epoch << ", batch "
                                         << batch.index << " (" << s.step->precision_name()
                                         << "); training diverged: lower --lr, set --clip, or "
                                            "resume from the last checkpoint");
        loss_sum += value;
        samples += static_cast<std::int64_t>(batch.targets.size());
        ++micro;
        ++in_step;
        more = s.loader->next(batch);
      }
      const float norm = s.step->unscale_and_clip();
      if (std::isfinite(norm)) {
        norm_sum += norm;
        ++norms;
        m.grad_norm_max = std::max(m.grad_norm_max, static_cast<double>(norm));
      }
      s.step->apply();
      char status[96];
      std::snprintf(status, sizeof status, "loss %.4f", loss_sum / static_cast<double>(micro));
      bar.update(micro, status);
    }
    bar.finish();
    m.train_seconds = seconds_since(t0);
    m.train_loss = micro > 0 ? loss_sum / static_cast<double>(micro) : 0.0;
    m.samples_per_second = static_cast<double>(samples) / m.train_seconds;
    m.grad_norm_mean = norms > 0 ? norm_sum / static_cast<double>(norms) : 0.0;
    m.skipped_steps = scaler.stats().skipped_steps - skipped_before;
    m.loss_scale = scaler.get_scale();
    m.lr = optimizer.lr();
    m.optimizer_steps = optimizer.steps();
    const auto t_eval = std::chrono::steady_clock::now();
    const ConfusionMatrix cm = evaluate(&m.test_loss);
    m.eval_seconds = seconds_since(t_eval);
    m.test_accuracy = cm.accuracy();
    m.macro_f1 = cm.macro_f1();
    m.memory = memory_stats();
    s.history.push_back(m);
    s.next_epoch = epoch + 1;

    if (!c.checkpoint_dir.empty()) {
      char name[32];
      std::snprintf(name, sizeof name, "epoch-%04d", epoch);
      io::save_checkpoint(c.checkpoint_dir, name,
                          detail::encode_checkpoint(s.objects(), c, s.step->precision_name(), s.history, epoch));
      if (c.keep_checkpoints > 0) {
        io::prune_checkpoints(c.checkpoint_dir, static_cast<std::size_t>(c.keep_checkpoints));
      }
    }
    if (!c.log_path.empty()) {
      // The whole log is rewritten atomically: a crash never leaves a torn line behind.
      std::string text = s.log_header.dump() + "\n";
      for (const EpochMetrics& h : s.history) {
        json line = detail::metrics_to_json(h);
        line["type"] = "epoch";
        text += line.dump() + "\n";
      }
      io::write_file_atomically(c.log_path, text);
    }
    if (on_epoch) on_epoch(m);
  }
  return s.history;
}

TrainConfig checkpoint_config(const std::string& path) {
  const std::string resolved = io::resolve_checkpoint(path);
  return detail::read_checkpoint_header(io::load_checkpoint(resolved), resolved).config;
}

CheckpointEvaluation evaluate_checkpoint(const std::string& path, const std::string& data_dir,
                                         std::int64_t limit_test) {
  CheckpointEvaluation out;
  out.path = io::resolve_checkpoint(path);
  const io::CheckpointFiles files = io::load_checkpoint(out.path);
  const detail::CheckpointHeader h = detail::read_checkpoint_header(files, out.path);
  TrainConfig c = h.config;
  out.config = c;
  out.epoch = h.epoch;
  c.resume = out.path;
  c.epochs = std::max(c.epochs, h.epoch + 1);  // evaluation only: no epoch is trained
  c.log_path.clear();
  c.checkpoint_dir.clear();
  if (!data_dir.empty()) c.data_dir = data_dir;
  if (limit_test > 0) c.limit_test = limit_test;
  c.limit_train = h.config.limit_train;
  Trainer trainer(c);
  out.confusion = trainer.evaluate(&out.test_loss);
  return out;
}

}  // namespace mixprec::train
