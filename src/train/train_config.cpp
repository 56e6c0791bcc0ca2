// TrainConfig validation and its JSON form; EpochMetrics' JSON form.
#include <algorithm>
#include <cmath>
#include <limits>

#include "mixprec/amp/precision.h"
#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "io/json_number.h"
#include "train/config_json.h"

namespace mixprec::train {

void TrainConfig::validate() const {
  constexpr const char* op = "train";
  MIXPREC_CHECK(!model.empty(), ValueError, op, "--model is empty; choose one of " << models::model_names());
  MIXPREC_CHECK(epochs >= 1 && epochs <= 10000, ValueError, op,
                "--epochs must be in [1, 10000], got " << epochs);
  MIXPREC_CHECK(batch_size >= 1 && batch_size <= (1 << 20), ValueError, op,
                "--batch-size must be in [1, 1048576], got " << batch_size);
  step_config(1).validate(op);
  MIXPREC_CHECK(threads >= 0 && threads <= 1024, ValueError, op,
                "--threads must be in [1, 1024] (0 = default), got " << threads);
  MIXPREC_CHECK(data_workers >= -1 && data_workers <= 256, ValueError, op,
                "--data-workers must be in [0, 256] (-1 = default), got " << data_workers);
  MIXPREC_CHECK(limit_train == -1 || limit_train >= 1, ValueError, op,
                "--limit-train must be >= 1, got " << limit_train);
  MIXPREC_CHECK(limit_test == -1 || limit_test >= 1, ValueError, op,
                "--limit-test must be >= 1, got " << limit_test);
  MIXPREC_CHECK(keep_checkpoints >= 0, ValueError, op,
                "--keep-checkpoints must be >= 0 (0 keeps all), got " << keep_checkpoints);
  MIXPREC_CHECK(checkpoint_every_steps >= 0, ValueError, op,
                "--checkpoint-every-steps must be >= 0 (0 = only after epochs), got " << checkpoint_every_steps);
  MIXPREC_CHECK(checkpoint_every_steps == 0 || !checkpoint_dir.empty(), ValueError, op,
                "--checkpoint-every-steps " << checkpoint_every_steps
                                            << " needs --checkpoint-dir DIR to write the checkpoints into");
  MIXPREC_CHECK(max_steps == -1 || max_steps >= 1, ValueError, op,
                "--max-steps must be >= 1 (or -1 for no limit), got " << max_steps);
  MIXPREC_CHECK(val_fraction == 0.0 || (val_fraction > 0.0 && val_fraction < 1.0), ValueError, op,
                "--val-fraction must be in (0, 1), got " << val_fraction);
  const bool csv = data.rfind("csv:", 0) == 0;
  MIXPREC_CHECK(csv || target.empty(), ValueError, op,
                "--target '" << target << "' names a column of a table, but --data is '" << data
                             << "'; give --data csv:PATH");
  MIXPREC_CHECK(csv || test_data.empty(), ValueError, op,
                "--test-data '" << test_data << "' needs --data csv:PATH (idx:DIR has its own t10k-* "
                                                "files)");
  MIXPREC_CHECK(test_data.empty() || test_data.rfind("csv:", 0) == 0, ValueError, op,
                "--test-data must be csv:PATH, got '" << test_data << "'");
  MIXPREC_CHECK(task == "classification" || task == "regression" || task.empty(), ValueError, op,
                "--task must be classification or regression, got '" << task << "'");
  MIXPREC_CHECK(csv || task != "regression", ValueError, op,
                "--task regression needs a table with a real-valued target: --data csv:PATH --target COLUMN");
  MIXPREC_CHECK(inputs >= 0 && outputs >= 0, ValueError, op, "the model's inputs and outputs must be >= 0 (0 = from the data)");
  MIXPREC_CHECK(context >= 0 && layers >= 0 && heads >= 0 && width >= 0, ValueError, op,
                "--context, --layers, --heads and --width must be >= 1 (0 = the model's default)");
  MIXPREC_CHECK(histogram_every >= 0, ValueError, op,
                "--histogram-every must be >= 0 (0 = no histograms), got " << histogram_every);
  MIXPREC_CHECK(policy_out.empty() || amp::parse_precision_mode(precision) == amp::PrecisionMode::auto_layer,
                ValueError, op,
                "--policy-out writes the per-layer dtypes of --precision auto-layer; with --precision "
                    << precision << " drop it");
  MIXPREC_CHECK(dropout >= 0.0f && dropout < 1.0f, ValueError, op,
                "--dropout must be in [0, 1), got " << dropout);
}

models::ModelOptions TrainConfig::model_options() const {
  models::ModelOptions o;
  o.seed = seed;
  o.context = context;
  o.image_size = image_size;
  o.memory_format = memory_format;
  o.layers = layers;
  o.heads = heads;
  o.width = width;
  o.dropout = dropout;
  o.checkpoint_activations = checkpoint_activations;
  o.inputs = inputs;
  o.outputs = outputs;
  return o;
}

StepConfig TrainConfig::step_config(std::int64_t scheduler_steps) const {
  return StepConfig{.precision = precision,
                    .compute = compute,
                    .layer_policy = layer_policy,
                    .optimizer = optimizer,
                    .lr = lr,
                    .weight_decay = weight_decay,
                    .no_decay = no_decay,
                    .clip = clip,
                    .accum = accum,
                    .scheduler = scheduler,
                    .scheduler_steps = scheduler_steps,
                    .loss_scaling = loss_scaling,
                    .scaler_growth_interval = scaler_growth_interval,
                    .seed = seed,
                    .shard_optimizer = shard_optimizer,
                    .wire_dtype = wire_dtype,
                    .inject_overflow = inject_overflow,
                    .fp8_amax_history = fp8_amax_history,
                    .fp8_margin = fp8_margin,
                    .fp8_format = fp8_format,
                    .graphs = cuda_graphs};
}

namespace detail {

using nlohmann::json;

json config_to_json(const TrainConfig& c) {
  return json{{"model", c.model},
              {"data", c.data},
              {"test_data", c.test_data},
              {"target", c.target},
              {"task", c.task},
              {"inputs", c.inputs},
              {"outputs", c.outputs},
              {"context", c.context},
              {"image_size", c.image_size},
              {"memory_format", c.memory_format},
              {"layers", c.layers},
              {"heads", c.heads},
              {"width", c.width},
              {"dropout", c.dropout},
              {"checkpoint_activations", c.checkpoint_activations},
              {"max_steps", c.max_steps},
              {"val_fraction", c.val_fraction},
              {"precision", c.precision},
              {"epochs", c.epochs},
              {"batch_size", c.batch_size},
              {"lr", c.lr},
              {"optimizer", c.optimizer},
              {"weight_decay", c.weight_decay},
              {"no_decay", c.no_decay},
              {"clip", c.clip},
              {"accum", c.accum},
              {"cuda_graphs", c.cuda_graphs},
              {"scheduler", c.scheduler},
              {"loss_scaling", c.loss_scaling},
              {"scaler_growth_interval", c.scaler_growth_interval},
              {"seed", c.seed},
              {"threads", c.threads},
              {"data_workers", c.data_workers},
              {"limit_train", c.limit_train},
              {"limit_test", c.limit_test},
              {"data_dir", c.data_dir},
              {"log_path", c.log_path},
              {"tensorboard", c.tensorboard},
              {"histogram_every", c.histogram_every},
              {"checkpoint_dir", c.checkpoint_dir},
              {"keep_checkpoints", c.keep_checkpoints},
              {"checkpoint_every_steps", c.checkpoint_every_steps},
              {"detect_anomaly", c.detect_anomaly},
              {"shard_optimizer", c.shard_optimizer},
              {"wire_dtype", c.wire_dtype},
              {"inject_overflow", c.inject_overflow},
              {"fp8_amax_history", c.fp8_amax_history},
              {"fp8_margin", c.fp8_margin},
              {"fp8_format", c.fp8_format},
              {"sync_batchnorm", c.sync_batchnorm},
              {"compute", c.compute},
              {"layer_policy", c.layer_policy},
              {"policy_out", c.policy_out}};
}

namespace {
template <class T>
void get(const json& j, const char* key, T& out, const std::string& what) {
  try {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      out = io::json_integer<T>(j.at(key), "checkpoint", what + ": field '" + key + "'");
    } else if constexpr (std::is_floating_point_v<T>) {
      // JSON has no NaN or Inf: a metric that was not finite (an epoch whose every step was
      // skipped has no test loss, say) was written as null and reads back as NaN.
      const json& v = j.at(key);
      out = v.is_null() ? std::numeric_limits<T>::quiet_NaN() : v.get<T>();
    } else {
      out = j.at(key).get<T>();
    }
  } catch (const json::exception& e) {
    MIXPREC_CHECK(false, ValueError, "checkpoint",
                  what << ": field '" << key << "' is missing or has the wrong type (" << e.what()
                       << ")");
  }
}
// j[key] if present (a JSON integer that fits), else fallback: json::value() would cast a JSON
// 1e300 to int64 (undefined behaviour).
std::int64_t int_or(const json& j, const char* key, std::int64_t fallback, const std::string& what) {
  return io::json_integer_or(j, key, fallback, "checkpoint", what);
}
}  // namespace

TrainConfig config_from_json(const json& j, const std::string& what) {
  TrainConfig c;
  get(j, "model", c.model, what);
  get(j, "precision", c.precision, what);
  get(j, "epochs", c.epochs, what);
  get(j, "batch_size", c.batch_size, what);
  get(j, "lr", c.lr, what);
  get(j, "optimizer", c.optimizer, what);
  get(j, "weight_decay", c.weight_decay, what);
  get(j, "clip", c.clip, what);
  get(j, "accum", c.accum, what);
  c.cuda_graphs = j.value("cuda_graphs", std::string("off"));  // absent before graphs existed
  get(j, "scheduler", c.scheduler, what);
  get(j, "seed", c.seed, what);
  get(j, "threads", c.threads, what);
  // Clamped one past the valid range, so that the cast to int is defined and validate() refuses it.
  c.data_workers = static_cast<int>(std::clamp<std::int64_t>(int_or(j, "data_workers", -1, what), -2, 257));
  get(j, "limit_train", c.limit_train, what);
  get(j, "limit_test", c.limit_test, what);
  get(j, "data_dir", c.data_dir, what);
  get(j, "log_path", c.log_path, what);
  get(j, "checkpoint_dir", c.checkpoint_dir, what);
  get(j, "keep_checkpoints", c.keep_checkpoints, what);
  c.detect_anomaly = j.value("detect_anomaly", false);
  // Checkpoints written before these existed used the defaults.
  c.loss_scaling = j.value("loss_scaling", std::string("dynamic"));
  c.no_decay = j.value("no_decay", std::string());
  c.scaler_growth_interval = int_or(j, "scaler_growth_interval", 2000, what);
  c.data = j.value("data", std::string());
  c.context = int_or(j, "context", 0, what);
  c.image_size = int_or(j, "image_size", 0, what);
  c.memory_format = j.value("memory_format", std::string());
  c.layers = int_or(j, "layers", 0, what);
  c.heads = int_or(j, "heads", 0, what);
  c.width = int_or(j, "width", 0, what);
  c.dropout = j.value("dropout", 0.0f);
  c.checkpoint_activations = j.value("checkpoint_activations", false);
  c.sync_batchnorm = j.value("sync_batchnorm", false);
  c.compute = j.value("compute", "");
  c.layer_policy = j.value("layer_policy", "");
  c.policy_out = j.value("policy_out", "");
  c.max_steps = int_or(j, "max_steps", -1, what);
  c.val_fraction = j.value("val_fraction", 0.1);
  c.test_data = j.value("test_data", std::string());
  c.target = j.value("target", std::string());
  c.task = j.value("task", std::string("classification"));
  c.inputs = int_or(j, "inputs", 0, what);
  c.outputs = int_or(j, "outputs", 0, what);
  c.tensorboard = j.value("tensorboard", std::string());
  c.histogram_every = int_or(j, "histogram_every", 100, what);
  c.checkpoint_every_steps = int_or(j, "checkpoint_every_steps", 0, what);
  c.fp8_amax_history = int_or(j, "fp8_amax_history", 16, what);
  c.fp8_margin = static_cast<int>(int_or(j, "fp8_margin", 0, what));
  c.fp8_format = j.value("fp8_format", std::string("hybrid"));
  // shard_optimizer, wire_dtype and inject_overflow are deliberately not read back: they describe the job's
  // layout over ranks, and a resume chooses its own (TrainConfig).
  return c;
}

json metrics_to_json(const EpochMetrics& m, models::TaskKind task) {
  json peak = json::object();
  for (std::size_t i = 0; i < kMemoryCategoryCount; ++i) {
    peak[name(static_cast<MemoryCategory>(i))] = m.memory.peak[i];
  }
  peak["total"] = m.memory.total_peak;
  // The block cache at the end of the epoch: flat over a long run when nothing leaks
  // (scripts/soak.sh).
  const json cache{{"cached_bytes", m.memory.cached_bytes}, {"system_allocations", m.memory.system_allocations}};
  json j{{"epoch", m.epoch},
         {"complete", m.complete},
         {"epoch_batches", m.epoch_batches},
         {"train_samples", m.train_samples},
         {"optimizer_steps", m.optimizer_steps},
         {"train_loss", m.train_loss},
         {"nonfinite_losses", m.nonfinite_losses},
         {"samples_per_second", m.samples_per_second},
         {"train_seconds", m.train_seconds},
         {"eval_seconds", m.eval_seconds},
         {"loss_scale", m.loss_scale},
         {"skipped_steps", m.skipped_steps},
         {"grad_norm_mean", m.grad_norm_mean},
         {"grad_norm_max", m.grad_norm_max},
         {"lr", m.lr},
         {"peak_memory_bytes", peak},
         {"block_cache", cache}};
  if (!m.fp8.empty()) j["fp8"] = json::parse(m.fp8);
  if (!m.layer_dtypes.empty()) {
    j["flops_16bit"] = m.flops_16bit;
    j["layer_dtypes"] = m.layer_dtypes;
  }
  if (task == models::TaskKind::language_model) {
    j["val_loss"] = m.test_loss;
    j["perplexity"] = m.perplexity;
    j["bits_per_byte"] = m.bits_per_byte;
  } else if (task == models::TaskKind::regression) {
    j["test_loss"] = m.test_loss;
    j["test_mse"] = m.mse;
    j["test_r2"] = m.r2;
  } else {
    j["test_loss"] = m.test_loss;
    j["test_accuracy"] = m.test_accuracy;
    j["macro_f1"] = m.macro_f1;
  }
  return j;
}

EpochMetrics metrics_from_json(const json& j, const std::string& what) {
  EpochMetrics m;
  get(j, "epoch", m.epoch, what);
  get(j, "optimizer_steps", m.optimizer_steps, what);
  get(j, "train_loss", m.train_loss, what);
  if (j.contains("val_loss")) {
    get(j, "val_loss", m.test_loss, what);
    get(j, "perplexity", m.perplexity, what);
    get(j, "bits_per_byte", m.bits_per_byte, what);
  } else if (j.contains("test_r2")) {
    get(j, "test_loss", m.test_loss, what);
    get(j, "test_mse", m.mse, what);
    get(j, "test_r2", m.r2, what);
  } else {
    get(j, "test_loss", m.test_loss, what);
    get(j, "test_accuracy", m.test_accuracy, what);
    get(j, "macro_f1", m.macro_f1, what);
  }
  m.complete = j.value("complete", true);
  m.epoch_batches = int_or(j, "epoch_batches", 0, what);
  m.train_samples = int_or(j, "train_samples", 0, what);
  get(j, "samples_per_second", m.samples_per_second, what);
  get(j, "train_seconds", m.train_seconds, what);
  get(j, "eval_seconds", m.eval_seconds, what);
  get(j, "loss_scale", m.loss_scale, what);
  get(j, "skipped_steps", m.skipped_steps, what);
  get(j, "grad_norm_mean", m.grad_norm_mean, what);
  get(j, "grad_norm_max", m.grad_norm_max, what);
  get(j, "lr", m.lr, what);
  m.flops_16bit = j.value("flops_16bit", -1.0);
  m.nonfinite_losses = int_or(j, "nonfinite_losses", 0, what);
  m.layer_dtypes = j.value("layer_dtypes", std::string());
  if (j.contains("fp8") && j.at("fp8").is_object()) m.fp8 = j.at("fp8").dump();
  const json& peak = j.at("peak_memory_bytes");
  for (std::size_t i = 0; i < kMemoryCategoryCount; ++i) {
    get(peak, name(static_cast<MemoryCategory>(i)), m.memory.peak[i], what);
  }
  get(peak, "total", m.memory.total_peak, what);
  if (j.contains("block_cache")) {
    get(j.at("block_cache"), "cached_bytes", m.memory.cached_bytes, what);
    get(j.at("block_cache"), "system_allocations", m.memory.system_allocations, what);
  }
  return m;
}

// Not compared: the fields that do not shape the computation (threads, data_workers, paths, epochs,
// max_steps, checkpoint_every_steps, limit_test, detect_anomaly, checkpoint_activations: bit-identical gradients,
// memory_format: a layout of the same values, so a run moves between a GPU and a CPU), and
// sync_batchnorm. Like the number of ranks (which a resume may change too), sync_batchnorm only
// says how a data-parallel run computes the global batch's BatchNorm statistics; the state it
// leaves (weights, running statistics, optimizer) means the same either way. Switching it on is
// how a run trained in one process continues on several ranks with the same statistics, and the
// flag is taken from the checkpoint when not given, so a plain resume keeps it.
std::string first_incompatibility(const TrainConfig& saved, const TrainConfig& requested) {
  auto differ = [](const char* field, const auto& a, const auto& b) -> std::string {
    if (a == b) return "";
    return std::string(field) + ": checkpoint " + json(a).dump() + ", requested " + json(b).dump();
  };
  for (const std::string& d :
       {differ("model", saved.model, requested.model),
        differ("precision", saved.precision, requested.precision),
        differ("compute", saved.compute, requested.compute),
        differ("fp8_amax_history", saved.fp8_amax_history, requested.fp8_amax_history),
        differ("fp8_margin", saved.fp8_margin, requested.fp8_margin),
        differ("fp8_format", saved.fp8_format, requested.fp8_format),
        differ("optimizer", saved.optimizer, requested.optimizer),
        differ("batch_size", saved.batch_size, requested.batch_size),
        differ("accum", saved.accum, requested.accum), differ("lr", saved.lr, requested.lr),
        differ("weight_decay", saved.weight_decay, requested.weight_decay),
        differ("no_decay", saved.no_decay, requested.no_decay),
        differ("clip", saved.clip, requested.clip),
        differ("scheduler", saved.scheduler, requested.scheduler),
        differ("loss_scaling", saved.loss_scaling, requested.loss_scaling),
        differ("scaler_growth_interval", saved.scaler_growth_interval,
               requested.scaler_growth_interval),
        differ("seed", saved.seed, requested.seed),
        differ("data", saved.data, requested.data),
        differ("test_data", saved.test_data, requested.test_data),
        differ("target", saved.target, requested.target),
        differ("task", saved.task, requested.task),
        differ("context", saved.context, requested.context),
        differ("image_size", saved.image_size, requested.image_size),
        differ("layers", saved.layers, requested.layers),
        differ("heads", saved.heads, requested.heads),
        differ("width", saved.width, requested.width),
        differ("dropout", saved.dropout, requested.dropout),
        differ("val_fraction", saved.val_fraction, requested.val_fraction),
        differ("limit_train", saved.limit_train, requested.limit_train)}) {
    if (!d.empty()) return d;
  }
  return "";
}

}  // namespace detail
}  // namespace mixprec::train
