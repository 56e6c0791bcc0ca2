// Older training checkpoints onto today's model layout (train/checkpoint_upgrade.h).
#include "train/checkpoint_upgrade.h"

#include <charconv>
#include <cmath>
#include <optional>

#include "mixprec/core/error.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/runtime/node.h"

namespace mixprec::train::detail {
namespace {

constexpr const char* kOp = "checkpoint";

/// The merge whose module holds parameter `p` ("<into>.<name>"), if any.
const nn::StateMerge* merge_of(const std::string& p, const std::vector<nn::StateMerge>& merges) {
  for (const nn::StateMerge& m : merges) {
    if (p.starts_with(m.into + ".")) return &m;
  }
  return nullptr;
}

/// "param.<i>.<name>" -> (i, name); nullopt for any other scalar.
std::optional<std::pair<std::size_t, std::string>> split_param_scalar(const std::string& key) {
  if (!key.starts_with("param.")) return std::nullopt;
  const std::size_t dot = key.find('.', 6);
  if (dot == std::string::npos) return std::nullopt;
  std::size_t index = 0;
  const auto [end, ec] = std::from_chars(key.data() + 6, key.data() + dot, index);
  if (ec != std::errc() || end != key.data() + dot) return std::nullopt;
  return std::pair{index, key.substr(dot + 1)};
}

}  // namespace

std::vector<std::string> older_parameter_paths(const std::vector<std::string>& paths,
                                               const std::vector<nn::StateMerge>& merges) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < paths.size();) {
    const nn::StateMerge* m = merge_of(paths[i], merges);
    if (m == nullptr) {
      out.push_back(paths[i++]);
      continue;
    }
    // A module's own parameters are consecutive (named_parameters is depth first).
    std::vector<std::string> names;
    for (; i < paths.size() && merge_of(paths[i], merges) == m; ++i) {
      names.push_back(paths[i].substr(m->into.size() + 1));
    }
    for (const std::string& from : m->from) {
      for (const std::string& name : names) out.push_back(from + "." + name);
    }
  }
  return out;
}

std::vector<std::pair<std::string, double>> upgrade_optimizer_scalars(
    const std::vector<std::pair<std::string, double>>& scalars, const std::vector<std::string>& paths,
    const std::vector<nn::StateMerge>& merges, const std::string& path) {
  const std::vector<std::string> older = older_parameter_paths(paths, merges);
  // Each older parameter's index today: its own path, or the merged parameter it is a part of.
  std::map<std::string, std::size_t> today;
  for (std::size_t i = 0; i < paths.size(); ++i) today[paths[i]] = i;
  std::vector<std::size_t> index_now(older.size());
  for (std::size_t i = 0; i < older.size(); ++i) {
    std::string p = older[i];
    for (const nn::StateMerge& m : merges) {
      for (const std::string& from : m.from) {
        if (p.starts_with(from + ".")) p = m.into + p.substr(from.size());
      }
    }
    index_now[i] = today.at(p);
  }
  std::vector<std::pair<std::string, double>> out;
  std::map<std::string, std::pair<double, std::string>> merged;  // new key -> value, first part
  for (const auto& [key, value] : scalars) {
    const auto split = split_param_scalar(key);
    if (!split) {
      out.emplace_back(key, value);
      continue;
    }
    const auto [i, name] = *split;
    MIXPREC_CHECK(i < older.size(), ValueError, kOp,
                  "'" << path << "' has optimizer scalar '" << key << "' but the model had "
                      << older.size() << " parameters; it was written by a different model");
    const std::string now = "param." + std::to_string(index_now[i]) + "." + name;
    const auto [it, fresh] = merged.emplace(now, std::pair{value, older[i]});
    const bool same = value == it->second.first || (std::isnan(value) && std::isnan(it->second.first));
    MIXPREC_CHECK(fresh || same, ValueError, kOp,
                  "'" << path << "': the optimizer's '" << name << "' of '" << older[i] << "' ("
                      << value << ") differs from that of '" << it->second.second << "' ("
                      << it->second.first << "), and the two are one parameter now, '"
                      << paths[index_now[i]] << "'; the checkpoint cannot be resumed faithfully");
    if (fresh) out.emplace_back(now, value);
  }
  return out;
}

void upgrade_fp8_state(std::map<std::string, Tensor>& saved, const std::vector<nn::StateMerge>& merges,
                       const std::string& path) {
  runtime::NoGradGuard no_grad;
  for (const nn::StateMerge& m : merges) {
    for (const char* role : {"input", "weight", "grad"}) {
      for (const char* field : {"history", "scale", "amax"}) {
        const std::string suffix = std::string(".fp8_") + role + "_" + field;
        std::vector<Tensor> parts;
        for (const std::string& from : m.from) {
          const auto it = saved.find(from + suffix);
          if (it != saved.end()) parts.push_back(it->second);
        }
        // Only some in fp8 (the older default policy left the model's first Linear, a q_proj,
        // out of fp8 but not its k_proj and v_proj): no state the one layer could have had.
        // Left as it is: this run needs none for it when its policy keeps the layer out of fp8
        // too (today's default does: it is still the first Linear), and otherwise the restore
        // names the missing entry.
        if (parts.size() != m.from.size()) continue;
        MIXPREC_CHECK(saved.count(m.into + suffix) == 0, ValueError, kOp,
                      "'" << path << "' fp8 state has both '" << m.into << suffix
                          << "' and the entries of the layers it replaced; keep one of them");
        // Scales shrink as amaxes grow: the merged layer's is the smallest of theirs.
        const bool scale = std::string(field) == "scale";
        Tensor merged = parts[0];
        for (std::size_t k = 1; k < parts.size(); ++k) {
          merged = scale ? minimum(merged, parts[k]) : maximum(merged, parts[k]);
        }
        saved[m.into + suffix] = merged;
        for (const std::string& from : m.from) saved.erase(from + suffix);
      }
    }
  }
}

}  // namespace mixprec::train::detail
