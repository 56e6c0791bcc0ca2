// A Trainer's construction: the ranks agree on the job, a resume's checkpoint is checked before
// any data loads, the data and the model are built, and set_up makes the TrainStep, restores the
// checkpoint, opens the run's files and writes the log's header.
#include "mixprec/train/trainer.h"

#include <charconv>
#include <optional>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/device.h"
#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/data_parallel.h"
#include "mixprec/dist/world.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/directory_lock.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/io/sha256.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/norm_layers.h"
#include "io/utc_time.h"
#include "train/config_json.h"
#include "train/run_data.h"
#include "train/tensorboard_log.h"
#include "train/train_checkpoint.h"

#include "train/trainer_state.h"

namespace mixprec::train {
namespace {

using nlohmann::json;
constexpr const char* kOp = "train";

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
                     {"onednn", onednn_description()}, {"threads", num_threads()},
                     {"device", to_string(current_device())}};
  if (const Device d = current_device(); d.type == DeviceType::cuda) {
    const GpuInfo& g = gpu_inventory().gpus.at(static_cast<std::size_t>(d.index));
    hdr["hardware"]["gpu"] = g.name + ", compute capability " + std::to_string(g.cc_major) + "." +
                             std::to_string(g.cc_minor);
  }
  hdr["started"] = io::utc_timestamp_now();
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
    s.model = models::build_model(spec, options);
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

}  // namespace mixprec::train
