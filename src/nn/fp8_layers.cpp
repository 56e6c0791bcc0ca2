// The fp8 layer policy and scope (mixprec/nn/fp8_layers.h).
#include "mixprec/nn/fp8_layers.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "kernels/elementwise.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/module.h"
#include "mixprec/nn/transformer.h"

namespace mixprec::nn {
namespace {

thread_local Fp8Layers* active_layers = nullptr;

/// Every Linear of the tree with its path, depth first in registration order.
void collect_linears(const Module& m, std::vector<std::pair<const Linear*, std::string>>& out) {
  if (const auto* linear = dynamic_cast<const Linear*>(&m)) out.emplace_back(linear, m.path());
  for (const auto& [name, child] : m.children()) collect_linears(*child, out);
}

}  // namespace

Fp8Layers::Fp8Layers(Module& model, const runtime::Fp8Recipe& recipe,
                     const std::map<std::string, bool>& overrides, const std::string& source)
    : recipe_(recipe), found_inf_(Tensor::zeros({1})) {
  recipe_.validate();
  std::vector<std::pair<const Linear*, std::string>> linears;
  collect_linears(model, linears);
  MIXPREC_CHECK(!overrides.empty() || linears.size() >= 3, ValueError, "fp8",
                model.type_name() << " has " << linears.size()
                                  << " Linear layer(s); fp8 runs every Linear except the first "
                                     "and the last, so it needs at least 3: use bf16 for this model");
  // The default policy, then the overrides over it.
  std::vector<bool> chosen(linears.size());
  for (std::size_t i = 0; i < linears.size(); ++i) chosen[i] = i > 0 && i + 1 < linears.size();
  for (const auto& override_entry : overrides) {
    // Named, not a structured binding: clang (the fuzz build) captures no binding in a lambda.
    const auto& path = override_entry.first;
    const bool fp8 = override_entry.second;
    const auto it = std::find_if(linears.begin(), linears.end(),
                                 [&](const auto& l) { return l.second == path; });
    if (it == linears.end()) {
      std::string known;
      for (const auto& l : linears) known += (known.empty() ? "" : ", ") + l.second;
      const std::string fused = fused_qkv_layer(path);
      const bool has_fused = std::any_of(linears.begin(), linears.end(),
                                         [&](const auto& l) { return l.second == fused; });
      MIXPREC_CHECK(fused.empty() || !has_fused, ValueError, "fp8",
                    source << " names layer '" << path << "', one of the separate q, k and v "
                           << "projections of older versions; they are one Linear now, '" << fused
                           << "', with one fp8 scale: name that instead (one setting for q, k and v)");
      MIXPREC_CHECK(false, ValueError, "fp8",
                    source << " names layer '" << path << "', which is not a Linear of "
                           << model.type_name() << " (its Linears: " << known << ")");
    }
    chosen[static_cast<std::size_t>(it - linears.begin())] = fp8;
  }
  MIXPREC_CHECK(std::count(chosen.begin(), chosen.end(), true) > 0, ValueError, "fp8",
                source << " leaves no Linear of " << model.type_name()
                       << " in fp8; put one in fp8 (\"fp8\") or use bf16 for this model");
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (!chosen[i]) continue;
    Entry e{linears[i].first, linears[i].second, Fp8LinearState(recipe_)};
    e.state.found_inf = found_inf_;  // one flag for the step
    entries_.push_back(std::move(e));
  }
}

std::vector<std::string> Fp8Layers::paths() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.path);
  return out;
}

Fp8LinearState& Fp8Layers::state(const std::string& path) {
  for (Entry& e : entries_) {
    if (e.path == path) return e.state;
  }
  MIXPREC_CHECK(false, ValueError, "fp8", "'" << path << "' is not an fp8 layer of this model");
  return entries_.front().state;
}

Fp8LinearState* Fp8Layers::find(const Linear& layer) {
  for (Entry& e : entries_) {
    if (e.layer == &layer) return &e.state;
  }
  return nullptr;
}

bool Fp8Layers::take_found_inf() {
  const TransferReason why("fp8 found-inf flag");
  if (found_inf_.item() == 0.0f) return false;
  kernels::fill(found_inf_.data_ptr(), DType::f32, 1, 0.0f);  // on the device, no upload
  return true;
}

std::map<std::string, Tensor> Fp8Layers::state_tensors() const {
  std::map<std::string, Tensor> out;
  for (const Entry& e : entries_) {
    const std::pair<const char*, const Fp8TensorState*> roles[] = {
        {"input", &e.state.input}, {"weight", &e.state.weight}, {"grad", &e.state.grad}};
    for (const auto& [role, st] : roles) {
      const std::string p = (e.path.empty() ? "" : e.path + ".") + "fp8_" + role + "_";
      out[p + "history"] = st->history;
      out[p + "scale"] = st->scale;
      out[p + "amax"] = st->amax;
    }
  }
  return out;
}

void Fp8Layers::set_observe(bool on) {
  observe_ = on;
  for (Entry& e : entries_) {
    e.state.observe = on;
    if (!on) continue;
    for (Fp8TensorState* st : {&e.state.input, &e.state.weight, &e.state.grad}) {
      kernels::fill(st->observed.data_ptr(), DType::f32, st->observed.numel(), 0.0f);
    }
  }
}

std::vector<Fp8LayerReport> Fp8Layers::report() const {
  const TransferReason why("fp8 layer report");
  std::vector<Fp8LayerReport> out;
  for (const Entry& e : entries_) {
    Fp8LayerReport layer{e.path, {}};
    const std::pair<const char*, const Fp8TensorState*> roles[] = {
        {"input", &e.state.input}, {"weight", &e.state.weight}, {"grad", &e.state.grad}};
    for (const auto& [role, st] : roles) {
      Fp8RoleReport r;
      r.role = role;
      r.amax = st->amax.item();
      for (const float h : st->history.to_vector()) r.history_amax = std::max(r.history_amax, double{h});
      r.scale = st->scale.item();
      const std::vector<float> obs = st->observed.to_vector();
      r.observed = obs[2] != 0.0f;
      r.saturated = obs[0];
      r.flushed = obs[1];
      layer.roles.push_back(std::move(r));
    }
    out.push_back(std::move(layer));
  }
  return out;
}

Fp8Scope::Fp8Scope(Fp8Layers& layers) : saved_(active_layers) { active_layers = &layers; }
Fp8Scope::~Fp8Scope() { active_layers = saved_; }

Fp8LinearState* active_fp8_state(const Linear& layer) {
  return active_layers == nullptr ? nullptr : active_layers->find(layer);
}

}  // namespace mixprec::nn
