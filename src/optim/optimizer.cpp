#include "mixprec/optim/optimizer.h"

#include "runtime/weight_copies.h"

#include <cmath>
#include <cstring>
#include <map>

#include "runtime/op_scope.h"
#include "mixprec/runtime/node.h"
#include "kernels/convert.h"
#include "mixprec/core/transfer.h"
#include "mixprec/core/error.h"

namespace mixprec::optim {
namespace {

/// SplitMix64's finaliser: a bijection that spreads every input bit over the output.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string param_key(std::size_t i, const std::string& what) {
  return "param." + std::to_string(i) + "." + what;
}

/// Entries by name; StateError on a duplicate name.
template <class V>
std::map<std::string, const V*> index_by_name(const std::string& op,
                                              const std::vector<std::pair<std::string, V>>& list) {
  std::map<std::string, const V*> out;
  for (const auto& [key, value] : list) {
    MIXPREC_CHECK(out.emplace(key, &value).second, StateError, op.c_str(),
                  "load_state: entry '" << key << "' appears twice; pass each state entry once");
  }
  return out;
}

/// The given entries must be exactly the expected names (StateError naming the first mismatch).
template <class V, class W>
void require_same_names(const std::string& op, const char* kind,
                        const std::vector<std::pair<std::string, W>>& expected,
                        const std::map<std::string, const V*>& given) {
  for (const auto& entry : expected) {
    MIXPREC_CHECK(given.count(entry.first) != 0, StateError, op.c_str(),
                  "load_state: the state has no " << kind << " '" << entry.first
                      << "'; load a state saved by a " << op << " over the same parameters");
  }
  MIXPREC_CHECK(given.size() == expected.size(), StateError, op.c_str(),
                "load_state: the state has " << given.size() << " " << kind << "s but this "
                    << op << " has " << expected.size()
                    << "; load a state saved by a " << op << " over the same parameters with the "
                    << "same options");
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<Tensor> params, float lr,
                     OptimizerOptions options)
    : name_(std::move(name)), params_(std::move(params)), lr_(lr), options_(options) {
  const char* op = name_.c_str();
  MIXPREC_CHECK(!params_.empty(), ValueError, op,
                "got an empty parameter list; pass the tensors to optimize (e.g. module.parameters())");
  std::map<const Storage*, std::size_t> storages;  // to reject a tensor passed twice
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    MIXPREC_CHECK(p.defined(), ValueError, op,
                  "parameter " << i << " is undefined; pass defined tensors");
    MIXPREC_CHECK(p.requires_grad() && p.is_leaf(), ValueError, op,
                  "parameter " << i << " is not a leaf that requires grad; call "
                               "set_requires_grad() on the leaf tensors to optimize");
    MIXPREC_CHECK(p.is_contiguous(), ValueError, op,
                  "parameter " << i << " is not contiguous; optimize contiguous leaf tensors");
    const auto [it, fresh] = storages.emplace(p.impl().storage.get(), i);
    MIXPREC_CHECK(fresh, ValueError, op,
                  "parameters " << it->second << " and " << i
                                << " share storage; pass each parameter once");
  }
  set_lr(lr);
  param_group_.assign(params_.size(), 0);
  masters_.resize(params_.size());
  buffers_.resize(params_.size());
  param_steps_.assign(params_.size(), 0);
  if (options_.master_weights != MasterWeights::keep_fp32) return;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (p.dtype() == DType::f32) continue;
    Tensor master = Tensor::empty(p.shape(), DType::f32, MemoryCategory::optimizer_state);
    kernels::convert(p.data_ptr(), p.dtype(), master.data_ptr(), DType::f32, numel(i));
    masters_[i] = master;
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::set_param_groups(const std::vector<ParamGroup>& groups) {
  const char* op = name_.c_str();
  MIXPREC_CHECK(!groups.empty(), ValueError, op, "set_param_groups: give at least one group");
  std::map<const Storage*, std::size_t> index;
  for (std::size_t i = 0; i < params_.size(); ++i) index.emplace(params_[i].impl().storage.get(), i);
  std::vector<std::size_t> assigned(params_.size(), groups.size());
  std::vector<double> scales, decays;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const ParamGroup& group = groups[g];
    MIXPREC_CHECK(std::isfinite(group.lr_scale) && group.lr_scale > 0.0f, ValueError, op,
                  "group '" << group.name << "': lr_scale must be finite and > 0, got " << group.lr_scale);
    MIXPREC_CHECK(!group.weight_decay || (std::isfinite(*group.weight_decay) && *group.weight_decay >= 0.0f),
                  ValueError, op,
                  "group '" << group.name << "': weight_decay must be finite and >= 0, got "
                            << *group.weight_decay);
    for (const Tensor& p : group.params) {
      auto it = p.defined() ? index.find(p.impl().storage.get()) : index.end();
      MIXPREC_CHECK(it != index.end(), ValueError, op,
                    "group '" << group.name << "' names a tensor that is not one of this optimizer's "
                              "parameters; build the groups from the same parameters");
      MIXPREC_CHECK(assigned[it->second] == groups.size(), ValueError, op,
                    "parameter " << it->second << " is in two groups ('"
                                 << groups[assigned[it->second]].name << "' and '" << group.name
                                 << "'); put each parameter in one group");
      assigned[it->second] = g;
    }
    scales.push_back(group.lr_scale);
    decays.push_back(group.weight_decay ? static_cast<double>(*group.weight_decay) : -1.0);
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    MIXPREC_CHECK(assigned[i] < groups.size(), ValueError, op,
                  "parameter " << i << " is in no group; every parameter must be in one");
  }
  param_group_ = std::move(assigned);
  group_lr_scale_ = std::move(scales);
  group_weight_decay_ = std::move(decays);
}

double Optimizer::param_lr(std::size_t i) const {
  return static_cast<double>(lr_) * group_lr_scale_[param_group_.at(i)];
}

float Optimizer::param_weight_decay(std::size_t i, float fallback) const {
  const double wd = group_weight_decay_[param_group_.at(i)];
  return wd < 0.0 ? fallback : static_cast<float>(wd);
}

const Tensor& Optimizer::master(std::size_t i) const {
  MIXPREC_CHECK(i < masters_.size(), ValueError, name_.c_str(),
                "master(" << i << "): there are only " << masters_.size() << " parameters");
  return masters_[i];
}

void Optimizer::set_lr(float lr) {
  MIXPREC_CHECK(lr >= 0.0f && std::isfinite(lr), ValueError, name_.c_str(),
                "learning rate must be finite and >= 0, got " << lr);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

void Optimizer::step(const Tensor& grad_multiplier) {
  runtime::NoGradGuard no_grad;
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::optimizer, name_.c_str());
  const char* op = name_.c_str();
  std::vector<ParamUpdate> updates;
  // Validate every gradient first, so a bad one leaves all parameters unchanged.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    MIXPREC_CHECK(g.shape() == params_[i].shape(), ShapeError, op,
                  "the gradient of parameter " << i << " has shape " << to_string(g.shape())
                      << " but the parameter has " << to_string(params_[i].shape())
                      << "; set a gradient of the parameter's shape");
    updates.push_back({i, g.is_contiguous() ? g : g.contiguous(), 0, numel(i), 0});
  }
  if (grad_multiplier.defined()) {
    MIXPREC_CHECK(grad_multiplier.dtype() == DType::f32 && grad_multiplier.numel() == 1 &&
                      (updates.empty() || grad_multiplier.device() == updates[0].grad.device()),
                  ValueError, op,
                  "step: the gradient multiplier must be one f32 element on the gradients' "
                  "device (a 0-d tensor, e.g. clip_grad_norm_coefficient's), got "
                      << mixprec::name(grad_multiplier.dtype()) << " of shape "
                      << to_string(grad_multiplier.shape()));
  }
  if (updates.empty()) {
    prof.done_work(DType::f32);
    return;
  }
  grad_multiplier_ = grad_multiplier.defined() && !grad_multiplier.is_contiguous()
                         ? grad_multiplier.contiguous()
                         : grad_multiplier;
  pending_copies_.assign(params_.size(), Tensor());
  pending_copy_taken_.assign(params_.size(), 0);
  for (ParamUpdate& u : updates) {
    const std::size_t i = u.index;
    u.param_step = ++param_steps_[i];
    u.rng_stream = rng_stream(i, u.param_step);
    // An f32 weight whose 16-bit copy autocast keeps gets that copy rewritten in the same pass.
    if (!masters_[i].defined()) pending_copies_[i] = runtime::detail::writable_weight_copy(params_[i]);
  }
  update(updates);
  for (const ParamUpdate& u : updates) {
    const std::size_t i = u.index;
    if (prof.active()) {
      runtime::detail::add_work(static_cast<double>(numel(i)), static_cast<double>(update_bytes(i)));
    }
    params_[i].bump_version();
    if (pending_copy_taken_[i] != 0 && pending_copies_[i].defined()) {
      runtime::detail::mark_weight_copy_current(params_[i]);
    }
    if (masters_[i].defined()) masters_[i].bump_version();
  }
  pending_copies_.clear();
  pending_copy_taken_.clear();
  grad_multiplier_ = Tensor();
  ++steps_;
  prof.done_work(DType::f32);  // the update math and the state are f32
}

std::size_t Optimizer::update_bytes(std::size_t i) const {
  const Tensor g = params_.at(i).grad();
  // A parameter with an fp32 master is only written (the master is read); without one it is
  // read and written. Every state buffer is read and written.
  std::size_t bytes = (g.defined() ? g.nbytes() : params_[i].nbytes()) +
                      (masters_[i].defined() ? 2 * masters_[i].nbytes() + params_[i].nbytes()
                                             : 2 * params_[i].nbytes());
  for (const auto& entry : buffers_[i]) bytes += 2 * entry.second.nbytes();
  return bytes;
}

std::size_t Optimizer::step_bytes() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) total += update_bytes(i);
  return total;
}

Tensor Optimizer::add_state(std::size_t i, const std::string& buffer) {
  Tensor t = Tensor::zeros(params_.at(i).shape(), DType::f32, MemoryCategory::optimizer_state);
  buffers_.at(i).emplace_back(buffer, t);
  return t;
}

std::uint64_t Optimizer::rng_stream(std::size_t i, std::int64_t param_step) const noexcept {
  return mix64(mix64(mix64(options_.seed) ^ static_cast<std::uint64_t>(param_step)) ^ i);
}

std::size_t Optimizer::numel(std::size_t i) const {
  return static_cast<std::size_t>(params_.at(i).numel());
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (masters_[i].defined()) out.emplace_back(param_key(i, "master"), masters_[i]);
    for (const auto& [buffer, t] : buffers_[i]) out.emplace_back(param_key(i, buffer), t);
  }
  return out;
}

std::vector<std::pair<std::string, double>> Optimizer::state_scalars() const {
  std::vector<std::pair<std::string, double>> out;
  out.emplace_back("steps", static_cast<double>(steps_));
  out.emplace_back("lr", static_cast<double>(lr_));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(param_key(i, "step"), static_cast<double>(param_steps_[i]));
  }
  if (group_count() > 1) {  // one default group: nothing to save (and older states load)
    for (std::size_t g = 0; g < group_count(); ++g) {
      out.emplace_back("group." + std::to_string(g) + ".lr_scale", group_lr_scale_[g]);
      out.emplace_back("group." + std::to_string(g) + ".weight_decay", group_weight_decay_[g]);
    }
    for (std::size_t i = 0; i < params_.size(); ++i) {
      out.emplace_back(param_key(i, "group"), static_cast<double>(param_group_[i]));
    }
  }
  return out;
}

void Optimizer::load_state(const OptimizerState& state) {
  const char* op = name_.c_str();
  const auto mine = state_tensors();
  const auto my_scalars = state_scalars();
  const auto tensors = index_by_name(name_, state.tensors);
  const auto scalars = index_by_name(name_, state.scalars);
  require_same_names(name_, "tensor", mine, tensors);
  require_same_names(name_, "scalar", my_scalars, scalars);
  // Check everything before writing anything.
  std::vector<Tensor> sources;
  for (const auto& [key, dst] : mine) {
    const Tensor& src = *tensors.at(key);
    MIXPREC_CHECK(src.defined() && src.dtype() == DType::f32 && src.shape() == dst.shape(),
                  StateError, op,
                  "load_state: tensor '" << key << "' must be f32 of shape "
                      << to_string(dst.shape()) << "; load a state saved over the same parameters");
    sources.push_back(src.is_contiguous() ? src : src.contiguous());
  }
  for (const auto& [key, unused] : my_scalars) {
    const double v = *scalars.at(key);
    const bool is_rate = key == "lr" || key.ends_with(".lr_scale");
    const bool ok = is_rate                        ? (v >= 0.0 && std::isfinite(v))
                    : key.ends_with(".weight_decay") ? (v >= -1.0 && std::isfinite(v))
                    : key.ends_with(".group")        ? (v >= 0.0 && v < static_cast<double>(group_count()) &&
                                                        v == std::floor(v))
                                                     : (v >= 0.0 && v <= 9.0e15 && v == std::floor(v));
    MIXPREC_CHECK(ok, StateError, op,
                  "load_state: scalar '" << key << "' = " << v << " is not valid (a step count "
                      << "must be a whole number >= 0, lr finite and >= 0, a group index in range)");
  }
  for (std::size_t k = 0; k < mine.size(); ++k) {
    const Tensor& dst = mine[k].second;
    if (dst.data_ptr() != sources[k].data_ptr()) {
      // Sources from a checkpoint were uploaded when it was read: same device, a device copy.
      const Tensor src = sources[k].device() == dst.device() ? sources[k] : sources[k].to(dst.device());
      device_copy(dst.data_ptr(), src.data_ptr(), dst.nbytes(), dst.device());
    }
    dst.bump_version();
  }
  steps_ = static_cast<std::int64_t>(*scalars.at("steps"));
  lr_ = static_cast<float>(*scalars.at("lr"));
  if (group_count() > 1) {
    for (std::size_t g = 0; g < group_count(); ++g) {
      group_lr_scale_[g] = *scalars.at("group." + std::to_string(g) + ".lr_scale");
      group_weight_decay_[g] = *scalars.at("group." + std::to_string(g) + ".weight_decay");
    }
    for (std::size_t i = 0; i < params_.size(); ++i) {
      param_group_[i] = static_cast<std::size_t>(*scalars.at(param_key(i, "group")));
    }
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    param_steps_[i] = static_cast<std::int64_t>(*scalars.at(param_key(i, "step")));
    if (!masters_[i].defined()) continue;
    kernels::convert(masters_[i].data_ptr(), DType::f32, params_[i].data_ptr(), params_[i].dtype(),
                     numel(i));
    params_[i].bump_version();
  }
}

}  // namespace mixprec::optim
