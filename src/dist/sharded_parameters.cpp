// ShardedParameters: ZeRO-1's layout of the parameters over the ranks, the all-gather of the
// updated pieces, and the translation between a sharded optimizer's state and the full one.
#include "mixprec/dist/sharded_parameters.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::dist {
namespace {

constexpr const char* kOp = "dist.ShardedParameters";

/// "param.<k>.<rest>" -> {k, rest}; nullopt for any other name ("steps", "group.0.lr_scale").
std::optional<std::pair<std::size_t, std::string>> split_param_name(const std::string& name) {
  if (name.rfind("param.", 0) != 0) return std::nullopt;
  const std::size_t dot = name.find('.', 6);
  if (dot == std::string::npos) return std::nullopt;
  std::size_t index = 0;
  const auto [end, ec] = std::from_chars(name.data() + 6, name.data() + dot, index);
  if (ec != std::errc() || end != name.data() + dot) return std::nullopt;
  return std::make_pair(index, name.substr(dot + 1));
}

std::string param_name(std::size_t i, const std::string& rest) {
  return "param." + std::to_string(i) + "." + rest;
}

}  // namespace

ShardedParameters::ShardedParameters(const Communicator& comm, std::vector<Tensor> params)
    : comm_(&comm), params_(std::move(params)) {
  MIXPREC_CHECK(!params_.empty(), ValueError, kOp, "got no parameters to shard");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    MIXPREC_CHECK(p.defined() && p.dtype() == DType::f32 && p.is_contiguous(), ValueError, kOp,
                  "parameter " << i << " is " << (p.defined() ? name(p.dtype()) : "undefined")
                               << "; --shard-optimizer shards f32 parameters (the fp32, bf16 and "
                                  "fp16 modes), not 16-bit weights (pure-bf16)");
    offsets_.push_back(total_);
    total_ += static_cast<std::size_t>(p.numel());
  }
  MIXPREC_CHECK(total_ >= static_cast<std::size_t>(comm.size()), ValueError, kOp,
                "the model has " << total_ << " parameters, fewer than the " << comm.size()
                                 << " ranks that would share them");
  const Shard mine = share();
  runtime::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::size_t first = offsets_[i], last = first + static_cast<std::size_t>(params_[i].numel());
    const std::size_t lo = std::max(first, mine.begin), hi = std::min(last, mine.end());
    if (lo >= hi) continue;
    ParameterPiece piece{i, lo - first, hi - lo, lo, Tensor()};
    piece.view = params_[i]
                     .detach()
                     .reshape({params_[i].numel()})
                     .slice(0, static_cast<std::int64_t>(piece.begin),
                            static_cast<std::int64_t>(piece.begin + piece.count));
    piece.view.set_requires_grad(true);
    pieces_.push_back(std::move(piece));
  }
}

std::vector<Tensor> ShardedParameters::views() const {
  std::vector<Tensor> out;
  for (const ParameterPiece& p : pieces_) out.push_back(p.view);
  return out;
}

std::vector<optim::ParamGroup> ShardedParameters::local_groups(
    const std::vector<optim::ParamGroup>& groups) const {
  std::map<const void*, const Tensor*> view_of;  // by storage: a view shares its parameter's
  for (const ParameterPiece& p : pieces_) view_of.emplace(params_[p.param].impl().storage.get(), &p.view);
  std::vector<optim::ParamGroup> out;
  for (const optim::ParamGroup& g : groups) {
    optim::ParamGroup local = g;
    local.params.clear();
    for (const Tensor& t : g.params) {
      const auto it = view_of.find(t.impl().storage.get());
      if (it != view_of.end()) local.params.push_back(*it->second);
    }
    out.push_back(std::move(local));
  }
  return out;
}

void ShardedParameters::gather_parameters(std::vector<float>& flat) const {
  flat.resize(total_);
  // MPI exchanges host buffers: this rank's pieces cross down, the others' come back up.
  const TransferReason why("parameter all-gather");
  for (const ParameterPiece& p : pieces_) {
    download(flat.data() + p.flat, p.view.data_ptr(), p.count * sizeof(float), p.view.device());
  }
  comm_->allgather(flat.data(), total_);
  // Only the other ranks' elements come back: this rank's pieces were updated in place.
  const Shard mine = share();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::size_t first = offsets_[i], last = first + static_cast<std::size_t>(params_[i].numel());
    float* out = static_cast<float*>(params_[i].data_ptr());  // device memory: never read here
    const auto copy = [&](std::size_t lo, std::size_t hi) {
      if (lo < hi) upload(out + (lo - first), flat.data() + lo, (hi - lo) * sizeof(float), params_[i].device());
    };
    copy(first, std::min(last, mine.begin));            // before my share
    copy(std::max(first, mine.end()), last);            // after it
    params_[i].bump_version();
  }
}

std::vector<std::string> ShardedParameters::full_tensor_names(const optim::Optimizer& local) const {
  std::vector<std::string> buffers;  // in the order the local state lists them
  for (const auto& [name, t] : local.state_tensors()) {
    const auto parsed = split_param_name(name);
    MIXPREC_ASSERT(parsed.has_value());
    if (std::find(buffers.begin(), buffers.end(), parsed->second) == buffers.end()) {
      buffers.push_back(parsed->second);
    }
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (const std::string& b : buffers) out.push_back(param_name(i, b));
  }
  return out;
}

optim::OptimizerState ShardedParameters::gather_state(const optim::Optimizer& local) const {
  MIXPREC_CHECK(local.params().size() == pieces_.size(), ValueError, kOp,
                "gather_state needs the optimizer built over views() (" << pieces_.size()
                    << " pieces), got one over " << local.params().size() << " tensors");
  std::map<std::string, std::vector<float>> flats;  // buffer name -> the whole flat space
  for (const auto& [name, t] : local.state_tensors()) {
    const auto parsed = split_param_name(name);
    MIXPREC_ASSERT(parsed.has_value() && parsed->first < pieces_.size());
    const ParameterPiece& piece = pieces_[parsed->first];
    std::vector<float>& flat = flats[parsed->second];
    flat.resize(total_, 0.0f);
    const Tensor c = t.to(DType::f32).contiguous();
    const TransferReason why("optimizer state all-gather");
    download(flat.data() + piece.flat, c.data_ptr(), piece.count * sizeof(float), c.device());
  }
  // std::map iterates in name order: the same sequence of collectives on every rank.
  for (auto& [buffer, flat] : flats) comm_->allgather(flat.data(), total_);

  optim::OptimizerState out;
  for (const std::string& name : full_tensor_names(local)) {
    const auto [i, buffer] = *split_param_name(name);
    Tensor full = Tensor::empty(params_[i].shape(), DType::f32, MemoryCategory::workspace);
    const TransferReason why("optimizer state all-gather");
    upload(full.data_ptr(), flats.at(buffer).data() + offsets_[i],
           static_cast<std::size_t>(params_[i].numel()) * sizeof(float), full.device());
    out.tensors.emplace_back(name, full);
  }

  // Per-parameter scalars: the value of any rank holding a piece of the parameter (all its
  // pieces were updated together, so they agree); -inf marks "no piece here".
  std::map<std::string, std::map<std::size_t, double>> per_param;  // scalar -> param -> value
  for (const auto& [name, v] : local.state_scalars()) {
    if (const auto parsed = split_param_name(name)) {
      per_param[parsed->second][pieces_[parsed->first].param] = v;
    } else {
      out.scalars.emplace_back(name, v);
    }
  }
  for (const auto& [scalar, values] : per_param) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto it = values.find(i);
      const double mine = it != values.end() ? it->second : -std::numeric_limits<double>::infinity();
      out.scalars.emplace_back(param_name(i, scalar), comm_->allreduce_max(mine));
    }
  }
  return out;
}

void ShardedParameters::load_state(optim::Optimizer& local, const optim::OptimizerState& full) const {
  MIXPREC_CHECK(local.params().size() == pieces_.size(), ValueError, kOp,
                "load_state needs the optimizer built over views() (" << pieces_.size()
                    << " pieces), got one over " << local.params().size() << " tensors");
  std::map<std::string, const Tensor*> tensors;
  for (const auto& [name, t] : full.tensors) tensors.emplace(name, &t);
  std::map<std::string, double> scalars(full.scalars.begin(), full.scalars.end());

  optim::OptimizerState mine;
  for (const auto& [name, t] : local.state_tensors()) {
    const auto [k, buffer] = *split_param_name(name);
    const ParameterPiece& piece = pieces_[k];
    const std::string key = param_name(piece.param, buffer);
    const auto it = tensors.find(key);
    MIXPREC_CHECK(it != tensors.end(), StateError, kOp,
                  "load_state: the state has no tensor '" << key
                      << "'; load a state saved by the same optimizer over the same model");
    const Tensor& source = *it->second;
    MIXPREC_CHECK(source.numel() == params_[piece.param].numel(), StateError, kOp,
                  "load_state: '" << key << "' has " << source.numel() << " elements but parameter "
                                  << piece.param << " has " << params_[piece.param].numel());
    Tensor part = Tensor::empty({static_cast<std::int64_t>(piece.count)}, DType::f32, MemoryCategory::workspace);
    const Tensor flat = source.to(DType::f32).contiguous().to(part.device());
    device_copy(part.data_ptr(), static_cast<const float*>(flat.data_ptr()) + piece.begin,
                piece.count * sizeof(float), part.device());
    mine.tensors.emplace_back(name, part);
  }
  for (const auto& [name, v] : local.state_scalars()) {
    const auto parsed = split_param_name(name);
    const std::string key = parsed ? param_name(pieces_[parsed->first].param, parsed->second) : name;
    const auto it = scalars.find(key);
    MIXPREC_CHECK(it != scalars.end(), StateError, kOp,
                  "load_state: the state has no scalar '" << key
                      << "'; load a state saved by the same optimizer over the same model");
    mine.scalars.emplace_back(name, it->second);
  }
  local.load_state(mine);
}

}  // namespace mixprec::dist
