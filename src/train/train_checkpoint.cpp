#include "train/train_checkpoint.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "mixprec/core/error.h"
#include "kernels/copy.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/layers.h"
#include "io/json_number.h"
#include "train/checkpoint_upgrade.h"
#include "train/config_json.h"

namespace mixprec::train::detail {
namespace {

using nlohmann::json;
constexpr const char* kOp = "checkpoint";
constexpr const char* kFormat = "mixprec.training_state";
constexpr int kVersion = 1;

// Every module with its dotted path ("" for the root).
void walk(nn::Module& m, const std::string& path, std::vector<std::pair<std::string, nn::Module*>>& out) {
  out.emplace_back(path, &m);
  for (const auto& [name, child] : m.children()) {
    walk(*child, nn::join_path(path, name), out);
  }
}

std::vector<std::string> parameter_paths(const nn::Module& model) {
  std::vector<std::string> paths;
  for (const auto& [path, t] : model.named_parameters()) paths.push_back(path);
  return paths;
}

// "param.<i>.<buffer>" -> (i, buffer).
std::pair<std::size_t, std::string> split_state_name(const std::string& name) {
  const std::size_t dot = name.find('.', 6);
  MIXPREC_ASSERT(name.rfind("param.", 0) == 0 && dot != std::string::npos);
  std::size_t index = 0;
  std::from_chars(name.data() + 6, name.data() + dot, index);
  return {index, name.substr(dot + 1)};
}

const std::string& file(const io::CheckpointFiles& files, const std::string& name,
                        const std::string& path) {
  const auto it = files.files.find(name);
  MIXPREC_CHECK(it != files.files.end(), ValueError, kOp,
                "'" << path << "' has no " << name << "; it is not a mixprec training checkpoint");
  return it->second;
}

// C99 hex floats ("0x1.8p+3", "inf", "nan"): exact, and Inf/NaN survive, which JSON numbers
// (null for both) do not.
std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

double from_exact(const json& j, const std::string& what) {
  const std::string text = j.get<std::string>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  MIXPREC_CHECK(!text.empty() && end == text.c_str() + text.size(), ValueError, kOp,
                what << ": '" << text << "' is not a hex float");
  return v;
}

std::map<std::string, Tensor> to_map(std::vector<std::pair<std::string, Tensor>> tensors) {
  std::map<std::string, Tensor> m;
  for (auto& [name, t] : tensors) m.emplace(name, std::move(t));
  return m;
}

}  // namespace

io::CheckpointFiles encode_checkpoint(const TrainingObjects& o, const TrainConfig& config,
                                      const std::string& resolved_precision, models::TaskKind task,
                                      const std::vector<EpochMetrics>& history, int epoch,
                                      const PartialSums* partial) {
  const std::vector<std::string> paths = parameter_paths(*o.model);
  const std::vector<Tensor> params = o.model->parameters();
  MIXPREC_ASSERT(paths.size() == params.size() && o.optimizer_state != nullptr);
  const optim::Optimizer& optimizer = o.step->optimizer();
  // A sharded optimizer keeps no masters (it shards f32 parameters only).
  const bool masters = o.step->shards() == nullptr;

  std::vector<std::pair<std::string, Tensor>> model_tensors;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor master = masters ? optimizer.master(i) : Tensor();
    model_tensors.emplace_back(paths[i], master.defined() ? master : params[i].to(DType::f32));
  }
  for (const auto& [path, buffer] : o.model->named_buffers()) {
    model_tensors.emplace_back(path, buffer.to(DType::f32));
  }
  const std::map<std::string, std::string> meta{{"mixprec.model", config.model},
                                                {"mixprec.precision", resolved_precision},
                                                {"mixprec.epoch", std::to_string(epoch)}};
  std::vector<std::pair<std::string, Tensor>> optimizer_tensors;
  for (const auto& [name, t] : o.optimizer_state->tensors) {
    const auto [i, buffer] = split_state_name(name);
    if (buffer != "master") optimizer_tensors.emplace_back(paths[i] + "." + buffer, t);
  }

  json state{{"format", kFormat}, {"version", kVersion}, {"epoch", epoch},
             {"precision_resolved", resolved_precision}, {"config", config_to_json(config)}};
  state["history"] = json::array();
  for (const EpochMetrics& m : history) state["history"].push_back(metrics_to_json(m, task));
  if (partial != nullptr) {
    MIXPREC_ASSERT(!history.empty() && !history.back().complete);
    state["partial_sums"] = {{"loss_sum", exact(partial->loss_sum)},
                             {"norm_sum", exact(partial->norm_sum)},
                             {"norms", partial->norms}};
  }
  json scalars = json::object();
  for (const auto& [name, v] : o.optimizer_state->scalars) scalars[name] = v;
  state["optimizer"] = {{"name", optimizer.name()}, {"scalars", scalars}};
  state["grad_scaler"] = json::parse(o.step->scaler().to_json());
  if (const optim::LRScheduler* scheduler = o.step->scheduler()) {
    const optim::LRSchedulerState s = scheduler->state();
    state["scheduler"] = {{"name", scheduler->name()},
                          {"step_count", s.step_count},
                          {"last_optimizer_steps", s.last_optimizer_steps},
                          {"base_lr", s.base_lr}};
  }
  if (o.data_schema != nullptr && !o.data_schema->is_null()) state["data_schema"] = *o.data_schema;
  // Every counter that seeds a random mask (Dropout, attention dropout), in module order.
  state["random_state"] = o.model->random_state();
  // auto-layer: the layers' dtypes and what decides their next moves.
  if (const PrecisionAutopilot* pilot = o.step->autopilot()) state["autopilot"] = json::parse(pilot->state());

  io::CheckpointFiles files;
  files.files["model.safetensors"] = io::encode_safetensors(model_tensors, meta);
  files.files["optimizer.safetensors"] = io::encode_safetensors(optimizer_tensors, meta);
  files.files["state.json"] = state.dump(1);
  // fp8 recipes: every fp8 layer's scales, amaxes and histories, so a resume scales the next
  // step exactly as the uninterrupted run would.
  if (const nn::Fp8Layers* fp8 = o.step->fp8_layers()) {
    std::vector<std::pair<std::string, Tensor>> fp8_tensors;
    for (const auto& [name, t] : fp8->state_tensors()) fp8_tensors.emplace_back(name, t);
    files.files["fp8.safetensors"] = io::encode_safetensors(fp8_tensors, meta);
  }
  return files;
}

CheckpointHeader read_checkpoint_header(const io::CheckpointFiles& files, const std::string& path) {
  const std::string what = "checkpoint '" + path + "' state.json";
  CheckpointHeader h;
  try {
    const json state = json::parse(file(files, "state.json", path));
    MIXPREC_CHECK(state.value("format", "") == kFormat && state.contains("version") &&
                      state.at("version") == kVersion,
                  ValueError, kOp,
                  what << " is not a version-" << kVersion << " mixprec training state");
    h.epoch = io::json_integer<int>(state.at("epoch"), kOp, what + ": epoch");
    h.resolved_precision = state.at("precision_resolved").get<std::string>();
    h.config = config_from_json(state.at("config"), what);
    for (const json& m : state.at("history")) h.history.push_back(metrics_from_json(m, what));
    if (state.contains("partial_sums")) {
      const json& p = state.at("partial_sums");
      h.partial = PartialSums{from_exact(p.at("loss_sum"), what), from_exact(p.at("norm_sum"), what),
                              io::json_integer<std::int64_t>(p.at("norms"), kOp, what + ": norms")};
    }
    if (state.contains("data_schema")) h.data_schema = state.at("data_schema");
  } catch (const json::exception& e) {
    MIXPREC_CHECK(false, ValueError, kOp, what << " is malformed: " << e.what());
  }
  return h;
}

namespace {

/// Copies fp8.safetensors into the fp8 layers' state tensors (in place: the layers keep their
/// handles); ValueError naming what is missing or mismatched.
void restore_fp8_state(const io::CheckpointFiles& files, const std::string& path, nn::Fp8Layers& fp8,
                       const std::vector<nn::StateMerge>& merges) {
  const auto it = files.files.find("fp8.safetensors");
  MIXPREC_CHECK(it != files.files.end(), ValueError, kOp,
                "'" << path << "' has no fp8 scaling state (fp8.safetensors) but this run uses an fp8 "
                       "precision; resume it with the precision it was written with");
  std::map<std::string, Tensor> saved =
      to_map(io::decode_safetensors(it->second, path + "/fp8.safetensors").tensors);
  upgrade_fp8_state(saved, merges, path);
  for (const auto& [name, dst] : fp8.state_tensors()) {
    const auto s = saved.find(name);
    MIXPREC_CHECK(s != saved.end() && s->second.shape() == dst.shape(), ValueError, kOp,
                  "'" << path << "' fp8 state '" << name << "' is "
                      << (s == saved.end() ? std::string("missing") : "of shape " + to_string(s->second.shape()))
                      << ", this run needs " << to_string(dst.shape())
                      << " (a different model or --fp8-amax-history)");
    kernels::copy(dst.shape(), {s->second.data_ptr(), s->second.dtype(), s->second.strides()},
                  {dst.data_ptr(), dst.dtype(), dst.strides()});
  }
}

}  // namespace

void restore_checkpoint(const io::CheckpointFiles& files, const std::string& path,
                        const TrainingObjects& o) {
  io::SafetensorsFile model_file =
      io::decode_safetensors(file(files, "model.safetensors", path), path + "/model.safetensors");
  io::SafetensorsFile opt_file = io::decode_safetensors(file(files, "optimizer.safetensors", path),
                                                        path + "/optimizer.safetensors");
  std::map<std::string, Tensor> model_tensors = to_map(std::move(model_file.tensors));
  std::map<std::string, Tensor> opt_tensors = to_map(std::move(opt_file.tensors));
  const std::vector<std::string> paths = parameter_paths(*o.model);
  // A checkpoint of an older model layout (separate q_proj, k_proj, v_proj): weights, masters
  // and optimizer tensors are keyed by parameter path, so the model upgrades them itself; the
  // per-parameter scalars and the fp8 state follow what it merged.
  const std::vector<nn::StateMerge> merges = o.model->upgrade_state(model_tensors);
  o.model->upgrade_state(opt_tensors);

  // Optimizer state first, named the way this optimizer expects; masters come from the model file.
  optim::OptimizerState opt_state;
  for (const std::string& name : o.step->full_optimizer_tensor_names()) {
    const auto [i, buffer] = split_state_name(name);
    const std::string key = buffer == "master" ? paths[i] : paths[i] + "." + buffer;
    const auto& source = buffer == "master" ? model_tensors : opt_tensors;
    const auto it = source.find(key);
    MIXPREC_CHECK(it != source.end(), ValueError, kOp,
                  "'" << path << "' lacks the optimizer tensor '" << key
                      << "'; it was written by a different model or optimizer");
    opt_state.tensors.emplace_back(name, it->second);
  }
  json state;
  try {
    state = json::parse(file(files, "state.json", path));
    for (const auto& [name, v] : state.at("optimizer").at("scalars").items()) {
      opt_state.scalars.emplace_back(name, v.get<double>());
    }
    if (!merges.empty()) opt_state.scalars = upgrade_optimizer_scalars(opt_state.scalars, paths, merges, path);
  } catch (const json::exception& e) {
    MIXPREC_CHECK(false, ValueError, kOp, "'" << path << "' state.json is malformed: " << e.what());
  }
  o.model->load_state_dict(model_tensors, /*strict=*/true);
  o.step->load_full_optimizer_state(opt_state);
  o.step->scaler().load_state(amp::GradScaler::from_json(state.at("grad_scaler").dump()));
  if (optim::LRScheduler* scheduler = o.step->scheduler()) {
    MIXPREC_CHECK(state.contains("scheduler"), ValueError, kOp,
                  "'" << path << "' has no scheduler state but this run uses a scheduler");
    const json& s = state.at("scheduler");
    optim::LRSchedulerState ls;
    ls.step_count = io::json_integer<std::int64_t>(s.at("step_count"), kOp, "scheduler step_count");
    ls.last_optimizer_steps =
        io::json_integer<std::int64_t>(s.at("last_optimizer_steps"), kOp, "scheduler last_optimizer_steps");
    ls.base_lr = s.at("base_lr").get<float>();
    scheduler->load_state(ls);
  }
  if (PrecisionAutopilot* pilot = o.step->autopilot()) {
    MIXPREC_CHECK(state.contains("autopilot"), ValueError, kOp,
                  "'" << path << "' has no precision autopilot state but this run uses --precision auto-layer");
    pilot->load_state(state.at("autopilot").dump(), merges);
  }
  if (nn::Fp8Layers* fp8 = o.step->fp8_layers()) restore_fp8_state(files, path, *fp8, merges);
  if (state.contains("random_state")) {
    o.model->set_random_state(state.at("random_state").get<std::vector<std::uint64_t>>());
  } else {
    // Checkpoints written before random_state: the Dropout counters by module path.
    std::vector<std::pair<std::string, nn::Module*>> modules;
    walk(*o.model, "", modules);
    for (const auto& [mpath, m] : modules) {
      if (auto* d = dynamic_cast<nn::Dropout*>(m)) {
        d->set_calls(io::json_integer<std::uint64_t>(state.at("dropout_calls").at(mpath), kOp, "dropout_calls"));
      }
    }
  }
}

}  // namespace mixprec::train::detail
