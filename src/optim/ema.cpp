// EMA of weights. The update is the ema_update kernel (kernels/optim.h): one pass per tensor
// reading the parameter (any dtype, widened exactly to f32) and updating the f32 shadow in place.
#include "mixprec/optim/ema.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "kernels/convert.h"
#include "kernels/copy.h"
#include "kernels/ema.h"
#include "mixprec/core/transfer.h"
#include "mixprec/core/error.h"

namespace mixprec::optim {
EMA::EMA(NamedParams params, float decay, bool warmup)
    : params_(std::move(params)), decay_(decay), warmup_(warmup) {
  MIXPREC_CHECK(!params_.empty(), ValueError, "EMA",
                "got an empty parameter list; pass the named parameters to average "
                "(e.g. module.named_parameters())");
  MIXPREC_CHECK(decay > 0.0f && decay < 1.0f, ValueError, "EMA",
                "decay must be in (0, 1), got " << decay << " (typical: 0.999 or 0.9999)");
  std::set<std::string> names;
  for (const auto& [key, p] : params_) {
    MIXPREC_CHECK(p.defined(), ValueError, "EMA", "parameter '" << key << "' is undefined");
    MIXPREC_CHECK(p.is_contiguous(), ValueError, "EMA",
                  "parameter '" << key << "' is not contiguous; average contiguous tensors");
    MIXPREC_CHECK(names.insert(key).second, ValueError, "EMA",
                  "the name '" << key << "' appears twice; pass each parameter once");
  }
  shadows_.reserve(params_.size());
  for (const auto& entry : params_) {
    const Tensor& p = entry.second;
    Tensor s = Tensor::empty(p.shape(), DType::f32, MemoryCategory::optimizer_state);
    kernels::convert(p.data_ptr(), p.dtype(), s.data_ptr(), DType::f32,
                     static_cast<std::size_t>(p.numel()));
    shadows_.push_back(std::move(s));
  }
}

float EMA::current_decay() const noexcept {
  if (!warmup_) return decay_;
  const double t = static_cast<double>(num_updates_);
  return static_cast<float>(std::min(double{decay_}, (1.0 + t) / (10.0 + t)));
}

void EMA::update() {
  const float a = static_cast<float>(1.0 - double{current_decay()});
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor& s = shadows_[i];
    kernels::ema_update(p.data_ptr(), p.dtype(), static_cast<float*>(s.data_ptr()), p.numel(), a);
    s.bump_version();
  }
  ++num_updates_;
}

std::map<std::string, Tensor> EMA::shadow() const {
  std::map<std::string, Tensor> out;
  for (std::size_t i = 0; i < params_.size(); ++i) out.emplace(params_[i].first, shadows_[i]);
  return out;
}

void EMA::copy_to(const NamedParams& params) const {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < params_.size(); ++i) index.emplace(params_[i].first, i);
  std::vector<std::size_t> source(params.size());
  for (std::size_t j = 0; j < params.size(); ++j) {  // validate everything before writing
    const auto& [key, t] = params[j];
    const auto it = index.find(key);
    MIXPREC_CHECK(it != index.end(), ValueError, "EMA",
                  "copy_to: no averaged weight is named '" << key
                      << "'; pass tensors named as the parameters given at construction");
    MIXPREC_CHECK(t.defined() && t.is_contiguous(), ValueError, "EMA",
                  "copy_to: tensor '" << key << "' is undefined or not contiguous");
    MIXPREC_CHECK(t.shape() == shadows_[it->second].shape(), ShapeError, "EMA",
                  "copy_to: tensor '" << key << "' has shape " << to_string(t.shape())
                      << " but its average has " << to_string(shadows_[it->second].shape()));
    source[j] = it->second;
  }
  for (std::size_t j = 0; j < params.size(); ++j) {
    const Tensor& t = params[j].second;
    kernels::convert(shadows_[source[j]].data_ptr(), DType::f32, t.data_ptr(), t.dtype(),
                     static_cast<std::size_t>(t.numel()));
    t.bump_version();
  }
}

EMA::Swap::Swap(const EMA& ema) : ema_(ema) {
  backup_.reserve(ema.params_.size());
  for (const auto& entry : ema.params_) {  // may throw (allocation): nothing written yet
    const Tensor& p = entry.second;
    Tensor b = Tensor::empty(p.shape(), p.dtype(), MemoryCategory::workspace);
    device_copy(b.data_ptr(), p.data_ptr(), p.nbytes(), p.device());
    backup_.push_back(std::move(b));
  }
  try {
    ema.copy_to(ema.params_);  // validated at construction, so this should not throw
  } catch (...) {
    restore();  // the destructor will not run for a half-built Swap
    throw;
  }
}

EMA::Swap::~Swap() { restore(); }

void EMA::Swap::restore() noexcept {
  for (std::size_t i = 0; i < backup_.size(); ++i) {
    const Tensor& p = ema_.params_[i].second;
    device_copy(p.data_ptr(), backup_[i].data_ptr(), p.nbytes(), p.device());
    p.bump_version();
  }
}

EmaState EMA::state() const {
  EmaState out;
  out.num_updates = num_updates_;
  for (std::size_t i = 0; i < params_.size(); ++i) out.shadows.emplace_back(params_[i].first, shadows_[i]);
  return out;
}

void EMA::load_state(const EmaState& state) {
  MIXPREC_CHECK(state.num_updates >= 0, StateError, "EMA",
                "load_state: num_updates is negative (" << state.num_updates << ")");
  std::map<std::string, std::size_t> given;
  for (std::size_t j = 0; j < state.shadows.size(); ++j) {
    MIXPREC_CHECK(given.emplace(state.shadows[j].first, j).second, StateError, "EMA",
                  "load_state: entry '" << state.shadows[j].first << "' appears twice");
  }
  MIXPREC_CHECK(given.size() == params_.size(), StateError, "EMA",
                "load_state: the state has " << given.size() << " shadows but this EMA has "
                    << params_.size() << "; load a state saved over the same parameters");
  std::vector<const Tensor*> from(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto it = given.find(params_[i].first);
    MIXPREC_CHECK(it != given.end(), StateError, "EMA",
                  "load_state: the state has no shadow '" << params_[i].first << "'");
    const Tensor& t = state.shadows[it->second].second;
    MIXPREC_CHECK(t.defined() && t.shape() == shadows_[i].shape(), StateError, "EMA",
                  "load_state: shadow '" << params_[i].first << "' is undefined or has the "
                      "wrong shape (expected " << to_string(shadows_[i].shape()) << ")");
    from[i] = &t;
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& t = *from[i];
    if (t.is_same(shadows_[i])) continue;
    const Shape strides = contiguous_strides(t.shape());
    kernels::copy(t.shape(), {t.data_ptr(), t.dtype(), t.strides()},
                  {shadows_[i].data_ptr(), DType::f32, strides});
    shadows_[i].bump_version();
  }
  num_updates_ = state.num_updates;
}

}  // namespace mixprec::optim
