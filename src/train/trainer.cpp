#include "mixprec/train/trainer.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <optional>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/precision.h"
#include "mixprec/autograd/anomaly.h"
#include "mixprec/autograd/node.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/core/runtime.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/data_parallel.h"
#include "mixprec/dist/world.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/directory_lock.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/io/sha256.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/clip_grad.h"
#include "mixprec/optim/sgd.h"
#include "train/config_json.h"
#include "train/progress.h"
#include "train/run_data.h"
#include "train/stop_signal.h"
#include "train/tensorboard_log.h"
#include "train/train_checkpoint.h"

namespace mixprec::train {
namespace {

using nlohmann::json;
constexpr const char* kOp = "train";

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

// A configuration value for a message: floats (stored as double) in their shortest form, so
// that --lr 0.002 reads 0.002.
std::string config_value(const json& v) {
  if (!v.is_number_float()) return v.dump();
  const double d = v.get<double>();
  const auto f = static_cast<float>(d);
  char buf[64];
  const auto end = static_cast<double>(f) == d ? std::to_chars(buf, buf + sizeof buf, f).ptr
                                               : std::to_chars(buf, buf + sizeof buf, d).ptr;
  return std::string(buf, end);
}

// Data parallel: every rank must run the same job, so the ranks compare their flags (naming the
// first field that differs from rank 0's) and their builds before anything whose collectives
// depend on the flags. The rank count is not part of the flags: a checkpoint resumes on any.
void agree_on_the_job(const dist::Communicator& comm, const TrainConfig& c) {
  if (comm.size() == 1) return;
  const json mine = detail::config_to_json(c);
  std::string reference = mine.dump();
  comm.broadcast(reference, 0);
  // Flags not given are read from --resume's checkpoint, so a stale copy shows up here too.
  const std::string hint = c.resume.empty() ? "; start every rank with the same flags"
                                            : "; start every rank with the same flags and the same --resume checkpoint";
  std::string difference;
  if (reference != mine.dump()) {
    const json theirs = json::parse(reference);
    for (const auto& [key, value] : mine.items()) {
      const json other = theirs.contains(key) ? theirs.at(key) : json(nullptr);
      if (other != value) {
        difference = "its configuration has " + key + " = " + config_value(value) + " where rank 0 has " +
                     config_value(other) + hint;
        break;
      }
    }
    if (difference.empty()) difference = "its configuration differs from rank 0's" + hint;
  }
  dist::agree_or_throw(comm, "comparing the training flags with rank 0's", difference);
  dist::check_same_everywhere(comm, "the mixprec build", std::string(__DATE__ " " __TIME__));
}

// What identifies a checkpoint's contents on every rank: its directory and its manifest (which
// holds every file's SHA-256), so that ranks reading node-local copies resume the same state.
std::string checkpoint_identity(const std::string& path, const io::CheckpointFiles& files) {
  return path + " (manifest sha256 " + io::sha256_hex(files.manifest).substr(0, 16) + ")";
}

// A table's or IDX set's shape decides the model's widths. A resumed run (or an evaluated
// checkpoint) must find the same shape and the same derivation of the inputs in its data, or
// the weights would meet inputs they were not trained on.
void apply_data_shape(const TrainConfig& c, const std::optional<io::CheckpointFiles>& resume_files,
                      const detail::RunData& d, models::ModelOptions& options) {
  if (d.inputs > 0) {
    MIXPREC_CHECK((c.inputs == 0 || c.inputs == d.inputs) && (c.outputs == 0 || c.outputs == d.outputs),
                  ValueError, kOp,
                  "--data " << c.data << " gives the model " << d.inputs << " inputs and " << d.outputs
                            << " outputs, but the checkpoint's model has " << c.inputs << " and " << c.outputs
                            << "; was the data file changed since training?");
    options.inputs = d.inputs;
    options.outputs = d.outputs;
    options = models::resolve_options(models::model_spec(c.model), options);
  }
  if (!resume_files) return;
  const json saved = detail::read_checkpoint_header(*resume_files, c.resume).data_schema;
  if (saved.is_null() || saved == d.schema) return;
  std::string field = "data_schema";
  for (const auto& [key, value] : saved.items()) {
    if (!d.schema.contains(key) || d.schema.at(key) != value) {
      field = key;
      break;
    }
  }
  MIXPREC_CHECK(false, ValueError, kOp,
                "--data " << c.data << " does not give the inputs the checkpoint was trained on: its "
                          << field << " differs (was the data file changed since training?)");
}
}  // namespace

struct Trainer::State {
  TrainConfig config;
  std::string model_description;
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<data::BatchSource> train, eval;
  std::shared_ptr<Task> task;
  std::unique_ptr<TrainStep> step;  // precision, optimizer, scaler, schedule: the one step
  std::vector<EpochMetrics> history;
  int next_epoch = 1;
  // A checkpoint written inside an epoch (a max_steps stop): the batches of next_epoch already
  // trained, and that epoch's partial metrics to continue from.
  std::int64_t first_batch = 0;
  std::optional<EpochMetrics> partial;
  std::optional<detail::PartialSums> partial_sums;  // exact; absent in older checkpoints
  std::optional<Interruption> interruption;         // the last run() stopped by a signal
  std::string resumed_from;
  // The checkpoint files read (and verified) for the early compatibility check, kept so that
  // set_up does not read and hash them a second time.
  std::optional<io::CheckpointFiles> resume_files;
  json log_header;
  std::unique_ptr<detail::TensorBoardLog> tensorboard;  // rank 0 with --tensorboard
  std::size_t moves_reported = 0;  // auto-layer: the autopilot's moves already announced
  // Rank 0 with --checkpoint-dir: no other process writes checkpoints there while this one runs.
  std::unique_ptr<io::DirectoryLock> checkpoint_lock;
  // The ranks of a data-parallel run (one process: SingleProcess); rank 0 writes files.
  const dist::Communicator* comm = &dist::world();
  bool writer() const { return comm->rank() == 0; }

  // csv/idx: how inputs were derived from the files, for checkpoints (train/data_schema.h).
  json data_schema;

  detail::TrainingObjects objects(const optim::OptimizerState* optimizer_state = nullptr) {
    return {model.get(), step.get(), optimizer_state, &data_schema};
  }
  std::int64_t steps_per_epoch() const {
    return (train->batches_per_epoch() + config.accum - 1) / config.accum;
  }
  // Optimizer steps taken, including the ones the scaler skipped: what max_steps counts.
  std::int64_t steps_taken() {
    return step->optimizer().steps() + step->scaler().stats().skipped_steps;
  }

  // Collective (data parallel): writes checkpoint `name` holding `hist` after `completed`
  // epochs (inside the next one when `sums` is given) and prunes old ones; rank 0 writes, all
  // ranks agree on how it went. Returns the checkpoint's path. A failure names what failed and
  // the previous checkpoint, which the atomic save left intact.
  std::string write_checkpoint(const std::string& name, const std::vector<EpochMetrics>& hist, int completed,
                               const detail::PartialSums* sums);

  // Collective (data parallel): what both constructors share after the job is agreed. Runs its
  // local part on every rank, then the ranks agree on how it went (one failing rank stops all).
  void set_up(json data_description);
  void set_up_locally(json data_description);
  // One evaluation pass in eval mode; the model is left in training mode.
  std::unique_ptr<Evaluation> evaluate();
  // auto-layer: prints the autopilot's moves not yet announced.
  void announce_moves(const PrecisionAutopilot& pilot, const std::function<void(const std::string&)>& out) {
    const std::vector<LayerMove>& moves = pilot.moves();
    for (; moves_reported < moves.size(); ++moves_reported) {
      const LayerMove& m = moves[moves_reported];
      if (out && writer()) {
        out("autopilot: after step " + std::to_string(m.step) + ", " + m.layer + " " + layer_dtype_name(m.from) +
            " -> " + layer_dtype_name(m.to) + ": " + m.reason);
      }
    }
  }
  // The JSONL log: the header; auto-layer's moves so far, one line each (with their step);
  // then one line per epoch.
  std::string log_text() const {
    std::string text = log_header.dump() + "\n";
    if (const PrecisionAutopilot* pilot = step->autopilot()) {
      for (const LayerMove& m : pilot->moves()) {
        text += json{{"type", "precision_move"}, {"step", m.step}, {"layer", m.layer},
                     {"from", layer_dtype_name(m.from)}, {"to", layer_dtype_name(m.to)}, {"reason", m.reason}}
                    .dump() +
                "\n";
      }
    }
    for (const EpochMetrics& h : history) {
      json line = detail::metrics_to_json(h, task->kind());
      line["type"] = "epoch";
      text += line.dump() + "\n";
    }
    return text;
  }
};

std::string Trainer::State::write_checkpoint(const std::string& name, const std::vector<EpochMetrics>& hist,
                                            int completed, const detail::PartialSums* sums) {
  const TrainConfig& c = config;
  // A sharded optimizer's full state is gathered from every rank before rank 0 writes it.
  const optim::OptimizerState full_state = step->full_optimizer_state();
  std::string path;
  dist::agree(*comm, "writing the checkpoint", [&] {
    if (!writer()) return;
    const std::vector<std::string> before = io::list_checkpoints(c.checkpoint_dir);
    try {
      path = io::save_checkpoint(c.checkpoint_dir, name,
                                 detail::encode_checkpoint(objects(&full_state), c, step->precision_name(),
                                                           task->kind(), hist, completed, sums));
    } catch (const ValueError& e) {
      // save_checkpoint builds the new one in a hidden directory and renames it into place only
      // when complete, so whatever failed (disk full, a file in the way) left the old ones alone.
      MIXPREC_CHECK(false, ValueError, kOp,
                    "could not write checkpoint '" << name << "' (" << e.what() << "); "
                        << (before.empty() ? "no earlier checkpoint exists in '" + c.checkpoint_dir + "'"
                                           : "the previous checkpoint '" + before.back() +
                                                 "' is intact: free space or fix the directory, then "
                                                 "resume with --resume " + c.checkpoint_dir));
    }
    if (c.keep_checkpoints > 0) io::prune_checkpoints(c.checkpoint_dir, static_cast<std::size_t>(c.keep_checkpoints));
  });
  return path;
}

void Trainer::State::set_up(json data_description) {
  // No collective inside: a rank that failed before it would leave the others waiting.
  dist::agree(*comm, "setting up training", [&] { set_up_locally(std::move(data_description)); });
  // "--precision auto" resolves from each node's CPU: every rank must train the same precision.
  if (comm->size() > 1) dist::check_same_everywhere(*comm, "the resolved precision", step->precision_name());
}

void Trainer::State::set_up_locally(json data_description) {
  const TrainConfig& c = config;
  if (comm->size() > 1) {
    MIXPREC_CHECK(c.batch_size % comm->size() == 0, ValueError, kOp,
                  "--batch-size " << c.batch_size << " does not divide among " << comm->size()
                                  << " ranks; --batch-size is the global batch, so give a multiple of "
                                  << comm->size());
    train = std::make_shared<dist::ShardedBatches>(train, comm->rank(), comm->size());
    if (c.sync_batchnorm) {
      // With one process there is nothing to synchronise: the flag is a no-op there.
      log_header["sync_batchnorm_layers"] = nn::set_sync_batchnorm(*model, comm);
    }
  }
  if (!c.save_initial_weights.empty() && writer()) {
    MIXPREC_CHECK(c.resume.empty(), ValueError, kOp,
                  "--save-initial-weights writes a fresh model's weights; it cannot be combined with --resume");
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [path, t] : model->state_dict()) tensors.emplace_back(path, t.to(DType::f32));
    io::save_safetensors(c.save_initial_weights, tensors, {{"mixprec.model", c.model}});
  }
  std::int64_t schedule = std::max<std::int64_t>(1, steps_per_epoch() * c.epochs);
  if (c.max_steps > 0) schedule = std::min(schedule, c.max_steps);
  step = std::make_unique<TrainStep>(*model, c.step_config(schedule), comm);
  if (!step->auto_reason().empty()) log_header["auto_precision_reason"] = step->auto_reason();
  if (!c.tensorboard.empty() && writer()) {
    std::vector<std::string> paths;
    std::vector<Tensor> params;
    for (const auto& [path, t] : model->named_parameters()) {
      paths.push_back(path);
      params.push_back(t);
    }
    tensorboard = std::make_unique<detail::TensorBoardLog>(c.tensorboard, std::move(paths), std::move(params),
                                                           c.histogram_every);
  }

  if (!c.resume.empty()) {
    const std::string path = io::resolve_checkpoint(c.resume);
    const io::CheckpointFiles files = resume_files ? std::move(*resume_files) : io::load_checkpoint(path);
    resume_files.reset();
    detail::CheckpointHeader h = detail::read_checkpoint_header(files, path);
    const std::string diff = detail::first_incompatibility(h.config, c);
    MIXPREC_CHECK(diff.empty(), ValueError, kOp,
                  "cannot resume from '" << path << "': it was written by a different run ("
                                         << diff << ")");
    const bool inside = !h.history.empty() && !h.history.back().complete;
    MIXPREC_CHECK(h.epoch < c.epochs || (inside && h.epoch == c.epochs), ValueError, kOp,
                  "checkpoint '" << path << "' already completed epoch " << h.epoch
                                 << " of a run asked to stop after " << c.epochs
                                 << "; pass a larger --epochs to train further");
    detail::restore_checkpoint(files, path, objects());
    history = std::move(h.history);
    next_epoch = h.epoch + 1;
    if (inside) {
      partial = history.back();
      history.pop_back();
      next_epoch = partial->epoch;
      first_batch = partial->epoch_batches;
      partial_sums = h.partial;
    }
    resumed_from = path;
    MIXPREC_CHECK(c.max_steps < 0 || steps_taken() < c.max_steps, ValueError, kOp,
                  "checkpoint '" << path << "' already took " << steps_taken()
                                 << " optimizer steps; pass a --max-steps above that to train further");
  }

  if (const PrecisionAutopilot* pilot = step->autopilot(); pilot && !c.policy_out.empty() && writer()) {
    // Now, so that an unwritable path fails before training rather than after the first epoch.
    LayerPolicy p = pilot->policy();
    p.model = c.model;
    p.write(c.policy_out);
  }
  if (!c.checkpoint_dir.empty() && writer()) {
    // Last of the checks (it creates the directory): a run refused for anything else leaves
    // nothing behind.
    checkpoint_lock = std::make_unique<io::DirectoryLock>(c.checkpoint_dir, "mixprec train");
  }

  json& hdr = log_header;
  hdr["type"] = "header";
  hdr["config"] = detail::config_to_json(c);
  hdr["precision_resolved"] = step->precision_name();
  hdr["policy"] = step->policy().to_string();
  hdr["task"] = models::name(task->kind());
  hdr["model"] = {{"name", c.model}, {"description", model_description},
                  {"parameters", model->parameter_count()}};
  hdr["data"] = std::move(data_description);
  hdr["hardware"] = {{"cpu", cpu_features().to_string()}, {"max_isa", name(max_isa())},
                     {"onednn", onednn_description()}, {"threads", num_threads()}};
  hdr["started"] = utc_now();
  hdr["ranks"] = comm->size();
  if (comm->size() > 1) {
    hdr["data_parallel"] = {{"shard_optimizer", c.shard_optimizer},
                            {"wire_dtype", c.wire_dtype},
                            {"gradient_buckets", step->gradient_buckets()}};
  }
  hdr["resumed_from"] = resumed_from.empty() ? json(nullptr) : json(resumed_from);
  if (const PrecisionAutopilot* pilot = step->autopilot()) {
    const LayerPolicy p = pilot->policy();
    json layers = json::object();
    for (const auto& [path, d] : p.layers) layers[path] = layer_dtype_name(d);
    hdr["autopilot"] = {{"start", layer_dtype_name(p.compute)},
                        {"replaying", c.layer_policy.empty() ? json(nullptr) : json(c.layer_policy)},
                        {"layers", layers}};
    moves_reported = pilot->moves().size();  // a resume announces only new moves
  }
}

Trainer::Trainer(TrainConfig config) : s_(std::make_unique<State>()) {
  State& s = *s_;
  const dist::Communicator& comm = *s.comm;
  // Data parallel: each step that may fail on some ranks only (flags, checkpoint and data files
  // read on every node) ends in an agreement, so that either every rank goes on or every rank
  // throws the same AgreedError naming the first rank that failed and why.
  models::ModelSpec spec;
  models::ModelOptions options;
  dist::agree(comm, "checking the training flags", [&] {
    config.validate();
    if (config.val_fraction == 0.0) {
      // Stored resolved; a table keeps more rows back than a corpus, whose tail is plenty.
      config.val_fraction = config.data.rfind("csv:", 0) == 0 ? 0.2 : 0.1;
    }
    spec = models::model_spec(config.model);
    options = models::resolve_options(spec, config.model_options());
    if (spec.task == models::TaskKind::language_model) {
      // Stored resolved, so a checkpoint says exactly which model it holds.
      config.context = options.context;
      config.layers = options.layers;
      config.heads = options.heads;
      config.width = options.width;
    }
  });
  agree_on_the_job(comm, config);
  if (!config.resume.empty()) {
    // Before any data is read: a checkpoint of another model or size fails on that, not on
    // the data it would need.
    std::string path;
    dist::agree(comm, "reading the checkpoint to resume from", [&] {
      path = io::resolve_checkpoint(config.resume);
      s.resume_files = io::load_checkpoint(path);
      const std::string diff =
          detail::first_incompatibility(detail::read_checkpoint_header(*s.resume_files, path).config, config);
      MIXPREC_CHECK(diff.empty(), ValueError, kOp,
                    "cannot resume from '" << path << "': it was written by a different run (" << diff << ")");
      // The tensor files' layouts too (decoded again, and used, after the data is loaded): a
      // hostile or damaged one is refused now, not after the seconds a data set can take.
      for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
        const auto it = s.resume_files->files.find(name);
        if (it != s.resume_files->files.end()) (void)io::decode_safetensors(it->second, path + "/" + name);
      }
    });
    if (comm.size() > 1) {
      dist::check_same_everywhere(comm, "the checkpoint to resume from", checkpoint_identity(path, *s.resume_files));
    }
  }
  s.config = std::move(config);
  if (s.config.threads > 0) set_num_threads(s.config.threads);
  s.model_description = spec.description;
  if (spec.task == models::TaskKind::language_model) {
    s.model_description = spec.name + ": " + std::to_string(options.layers) + " blocks, " +
                          std::to_string(options.heads) + " heads, width " + std::to_string(options.width) +
                          ", context " + std::to_string(options.context) + ", vocabulary " +
                          std::to_string(spec.num_classes);
  }
  detail::RunData d;
  dist::agree(comm, "loading the data and building the model", [&] {
    d = detail::load_run_data(spec, options, s.config);
    s.task = d.task ? d.task : make_task(spec);
    apply_data_shape(s.config, s.resume_files, d, options);
    s.config.inputs = options.inputs;
    s.config.outputs = options.outputs;
    s.data_schema = d.schema;
    s.model = spec.factory(options);
  });
  if (comm.size() > 1) {
    // Ranks reading files of different lengths would run different numbers of batches, and so
    // different sequences of collectives (a hang): compare what each rank loaded.
    dist::check_same_everywhere(comm, "the data loaded (source and sizes)", d.description.dump());
  }
  s.train = std::move(d.train);
  s.eval = std::move(d.eval);
  s.set_up(std::move(d.description));
}

Trainer::Trainer(TrainConfig config, std::shared_ptr<nn::Module> model,
                 std::shared_ptr<data::BatchSource> train_data,
                 std::shared_ptr<data::BatchSource> eval_data, std::shared_ptr<Task> task)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  dist::agree(*s.comm, "checking the training flags", [&] {
    MIXPREC_CHECK(model && train_data && eval_data && task, ValueError, kOp,
                  "a Trainer needs a model, training data, evaluation data and a task (one was null)");
    config.validate();
  });
  agree_on_the_job(*s.comm, config);
  s.config = std::move(config);
  if (s.config.threads > 0) set_num_threads(s.config.threads);
  s.model_description = model->type_name() + " (user model)";
  s.model = std::move(model);
  s.train = std::move(train_data);
  s.eval = std::move(eval_data);
  s.task = std::move(task);
  s.set_up(json{{"source", "user"}, {"train_batches_per_epoch", s.train->batches_per_epoch()}});
}

Trainer::~Trainer() = default;

const TrainConfig& Trainer::config() const { return s_->config; }
const std::string& Trainer::resolved_precision() const { return s_->step->precision_name(); }
nn::Module& Trainer::model() { return *s_->model; }
int Trainer::next_epoch() const { return s_->next_epoch; }
const std::optional<Interruption>& Trainer::interruption() const { return s_->interruption; }
const Task& Trainer::task() const { return *s_->task; }

EpochMetrics Trainer::evaluate_metrics(ConfusionMatrix* confusion) {
  EpochMetrics m;
  const std::unique_ptr<Evaluation> e = s_->evaluate();
  e->write(m);
  if (confusion != nullptr && e->confusion() != nullptr) *confusion = *e->confusion();
  return m;
}

ConfusionMatrix Trainer::evaluate(double* mean_loss) {
  const std::unique_ptr<Evaluation> e = s_->evaluate();
  MIXPREC_CHECK(e->confusion() != nullptr, ValueError, kOp,
                "a confusion matrix needs a classification task; this run is a "
                    << models::name(s_->task->kind()));
  if (mean_loss != nullptr) {
    EpochMetrics m;
    e->write(m);
    *mean_loss = m.test_loss;
  }
  return *e->confusion();
}

std::unique_ptr<Evaluation> Trainer::State::evaluate() {
  autograd::NoGradGuard no_grad;
  model->eval();
  amp::Autocast region(step->autocast(), step->compute_dtype());
  std::unique_ptr<Evaluation> e = task->evaluation();
  eval->start_epoch(0);
  for (data::Batch batch; eval->next(batch);) e->add((*model)(batch.inputs), batch);
  model->train();
  return e;
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
  s.interruption.reset();
  const detail::StopSignals signals(handle_stop_signals);
  // Collective under mpirun: mpirun forwards SIGTERM to every rank, but each may see it at a
  // different step, so they take the largest flag and stop together. One process: a load.
  auto stop_signal = [&]() -> int {
    if (!handle_stop_signals) return 0;
    if (s.comm->size() == 1) return signals.received();
    return static_cast<int>(s.comm->allreduce_max(static_cast<double>(signals.received())));
  };
  // Named by completed epochs, then the step inside the next one, so names sort by age.
  auto step_name = [&](int completed) {
    char name[48];
    std::snprintf(name, sizeof name, "epoch-%04d-step-%08lld", completed, static_cast<long long>(s.steps_taken()));
    return std::string(name);
  };
  s.model->train();
  bool stop = false;
  for (int epoch = s.next_epoch; epoch <= c.epochs && !stop; ++epoch) {
    reset_peak_memory();
    EpochMetrics m;
    m.epoch = epoch;
    double loss_sum = 0, norm_sum = 0, seconds_before = 0;
    std::int64_t micro = 0, norms = 0, samples = 0, skipped_before = scaler.stats().skipped_steps;
    // Losses that came out Inf/NaN (a forward overflow in fp16; the scaler skips those steps)
    // stay out of the mean, which would otherwise say nothing for the rest of the epoch.
    std::int64_t nonfinite = 0;
    const std::int64_t first_batch = s.partial ? s.first_batch : 0;
    if (s.partial) {
      // A resumed partial epoch continues its sums: exactly as stored, or (checkpoints written
      // before the sums were) recovered as means times counts, which may differ in the last bit.
      micro = s.partial->epoch_batches;
      nonfinite = s.partial->nonfinite_losses;
      if (s.partial_sums) {
        loss_sum = s.partial_sums->loss_sum;
        norm_sum = s.partial_sums->norm_sum;
        norms = s.partial_sums->norms;
      } else {
        loss_sum = s.partial->train_loss * static_cast<double>(micro - nonfinite);
        norms = (micro + c.accum - 1) / c.accum - s.partial->skipped_steps;
        norm_sum = s.partial->grad_norm_mean * static_cast<double>(norms);
      }
      m.grad_norm_max = s.partial->grad_norm_max;
      seconds_before = s.partial->train_seconds;
      samples = s.partial->train_samples / s.comm->size();
      skipped_before -= s.partial->skipped_steps;
      s.partial.reset();
      s.partial_sums.reset();
    }
    std::chrono::steady_clock::time_point t0;
    // The training half of the epoch's metrics, as they stand after `more` says whether batches
    // are left. Collective under mpirun (the mean loss over ranks).
    auto training_metrics = [&](bool more) {
      m.complete = !more;
      m.epoch_batches = micro;
      m.train_seconds = seconds_before + seconds_since(t0);
      m.nonfinite_losses = nonfinite;
      m.train_loss = dist::mean_over_ranks(
          *s.comm, micro > nonfinite ? loss_sum / static_cast<double>(micro - nonfinite) : 0.0);
      m.train_samples = samples * s.comm->size();
      m.samples_per_second = static_cast<double>(m.train_samples) / m.train_seconds;
      m.grad_norm_mean = norms > 0 ? norm_sum / static_cast<double>(norms) : 0.0;
      m.skipped_steps = scaler.stats().skipped_steps - skipped_before;
      m.loss_scale = scaler.get_scale();
      m.lr = optimizer.lr();
      m.optimizer_steps = optimizer.steps();
      if (const PrecisionAutopilot* pilot = s.step->autopilot()) {
        m.flops_16bit = pilot->sixteen_bit_flop_share();
        m.layer_dtypes.clear();
        for (const auto& [path, d] : pilot->policy().layers) {
          m.layer_dtypes += (m.layer_dtypes.empty() ? "" : ",") + path + "=" + layer_dtype_name(d);
        }
      }
    };
    // Collective: the exact sums of the epoch so far (data parallel: the losses' mean over the
    // ranks, so that a resume on any number of ranks continues from the global figure).
    auto partial_sums = [&] {
      const double losses = s.comm->size() == 1 ? loss_sum : s.comm->allreduce_sum(loss_sum) / s.comm->size();
      return detail::PartialSums{losses, norm_sum, norms};
    };
    // A checkpoint inside this epoch with its metrics so far, without an evaluation pass (too
    // slow to run every N steps, or within a preemption's grace period) and without a log line:
    // the log only ever shows finished epochs and --max-steps stops.
    auto checkpoint_inside = [&](bool more) {
      training_metrics(more);
      std::vector<EpochMetrics> hist = s.history;
      hist.push_back(m);
      hist.back().complete = false;
      const detail::PartialSums sums = partial_sums();
      return s.write_checkpoint(step_name(epoch - 1), hist, epoch - 1, &sums);
    };
    s.train->start_epoch(epoch - 1, first_batch);
    detail::ProgressBar bar(c.progress, "epoch " + std::to_string(epoch) + "/" + std::to_string(c.epochs),
                            s.train->batches_per_epoch());
    t0 = std::chrono::steady_clock::now();
    int signal = 0;
    data::Batch batch;
    bool more = s.train->next(batch);
    while (more && !stop && signal == 0) {
      // One optimizer step over up to `accum` micro-batches (the epoch's last step may have fewer).
      int in_step = 0;
      double step_loss = 0;
      autograd::set_anomaly_step(optimizer.steps());
      while (more && in_step < c.accum) {
        const double value = s.step->accumulate(
            [&] { return s.task->loss((*s.model)(batch.inputs), batch); });
        MIXPREC_CHECK(std::isfinite(value) || scaler.is_enabled(), ValueError, kOp,
                      "the loss became " << value << " at epoch " << epoch << ", batch "
                                         << batch.index << " (" << s.step->precision_name()
                                         << "); training diverged: lower --lr, set --clip, or "
                                            "resume from the last checkpoint");
        if (std::isfinite(value)) {
          loss_sum += value;
        } else {
          ++nonfinite;
        }
        step_loss += value;
        samples += batch.inputs.size(0);
        ++micro;
        ++in_step;
        more = s.train->next(batch);
      }
      // Data parallel: the step averages the gradients over the ranks before unscaling.
      const float norm = s.step->unscale_and_clip();
      if (std::isfinite(norm)) {
        norm_sum += norm;
        ++norms;
        m.grad_norm_max = std::max(m.grad_norm_max, static_cast<double>(norm));
      }
      const std::int64_t step_index = s.steps_taken();
      const double lr_used = optimizer.lr(), scale_used = scaler.get_scale();
      if (s.tensorboard && s.tensorboard->histograms_due(step_index)) {
        // Sharded, rank 0 holds the averaged gradients of its own share only: weights alone.
        s.tensorboard->histograms(step_index, scale_used, s.step->shards() == nullptr);
      }
      const bool applied = s.step->apply();
      if (const PrecisionAutopilot* pilot = s.step->autopilot()) s.announce_moves(*pilot, on_message);
      if (s.tensorboard) {
        s.tensorboard->step(step_index, step_loss / in_step, lr_used, scale_used, norm, !applied);
      }
      if (c.max_steps > 0 && s.steps_taken() >= c.max_steps) stop = true;
      if (!stop) signal = stop_signal();
      // The epoch's last step is followed by the epoch's own checkpoint.
      if (!stop && signal == 0 && more && c.checkpoint_every_steps > 0 && s.steps_taken() % c.checkpoint_every_steps == 0) {
        checkpoint_inside(more);
      }
      char status[96];
      std::snprintf(status, sizeof status, "loss %.4f", loss_sum / static_cast<double>(std::max<std::int64_t>(1, micro - nonfinite)));
      bar.update(micro - first_batch, status);
    }
    bar.finish();
    if (signal != 0 && more) {
      // Stopped inside the epoch: its checkpoint, then out. (At the epoch's end the epoch's own
      // checkpoint below serves.)
      const std::string path = c.checkpoint_dir.empty() ? std::string() : checkpoint_inside(more);
      s.interruption = Interruption{signal, epoch, s.steps_taken(), path};
      s.next_epoch = epoch;
      break;
    }
    training_metrics(more);
    const auto t_eval = std::chrono::steady_clock::now();
    s.evaluate()->write(m);
    m.eval_seconds = seconds_since(t_eval);
    m.memory = memory_stats();
    s.history.push_back(m);
    s.next_epoch = m.complete ? epoch + 1 : epoch;

    std::string checkpoint;
    if (!c.checkpoint_dir.empty()) {
      if (m.complete) {
        char name[48];
        std::snprintf(name, sizeof name, "epoch-%04d", epoch);
        checkpoint = s.write_checkpoint(name, s.history, epoch, nullptr);
      } else {
        const detail::PartialSums sums = partial_sums();
        checkpoint = s.write_checkpoint(step_name(epoch - 1), s.history, epoch - 1, &sums);
      }
    }
    if (!c.log_path.empty() && s.writer()) {
      // The whole log is rewritten atomically: a crash never leaves a torn line behind.
      io::write_file_atomically(c.log_path, s.log_text());
    }
    if (const PrecisionAutopilot* pilot = s.step->autopilot(); pilot && !c.policy_out.empty() && s.writer()) {
      LayerPolicy p = pilot->policy();
      p.model = c.model;
      p.write(c.policy_out);
    }
    if (s.tensorboard) {
      json line = detail::metrics_to_json(m, s.task->kind());
      s.tensorboard->epoch(epoch, line);
    }
    if (on_epoch) on_epoch(m);
    // A signal at the epoch's last step, or during its evaluation or checkpoint: stop here, at
    // the checkpoint just written, unless the run is over anyway.
    if (signal == 0 && !stop && epoch < c.epochs) signal = stop_signal();
    if (signal != 0 && epoch < c.epochs) {
      s.interruption = Interruption{signal, epoch, s.steps_taken(), checkpoint};
      break;
    }
  }
  // Ranks leave together: rank 0 may still be writing its checkpoint (dist/world.h: ranks that
  // reach exit far apart are ended as failed).
  s.comm->barrier();
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
  c.tensorboard.clear();
  c.checkpoint_dir.clear();
  c.checkpoint_every_steps = 0;
  if (!data_dir.empty()) c.data_dir = data_dir;
  if (limit_test > 0) c.limit_test = limit_test;
  c.limit_train = h.config.limit_train;
  c.max_steps = -1;
  Trainer trainer(c);
  out.task = trainer.task().kind();
  out.metrics = trainer.evaluate_metrics(&out.confusion);
  out.test_loss = out.metrics.test_loss;
  return out;
}

}  // namespace mixprec::train
