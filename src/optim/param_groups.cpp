#include "mixprec/optim/param_groups.h"

#include <sstream>

#include "mixprec/core/error.h"

namespace mixprec::optim {
namespace {

// Visits every module in registration order, as Module::parameters() lists their parameters.
void split(const nn::Module& m, const DecayExclusions& exclude, ParamGroup& decay, ParamGroup& no_decay) {
  const std::string type = m.type_name();
  const bool whole_module = (exclude.norm && type.find("Norm") != std::string::npos) ||
                            (exclude.embedding && type.find("Embedding") != std::string::npos);
  for (const auto& [name, p] : m.local_parameters()) {
    const bool out = whole_module || (exclude.bias && name == "bias");
    (out ? no_decay : decay).params.push_back(p);
  }
  for (const auto& [name, child] : m.children()) split(*child, exclude, decay, no_decay);
}

}  // namespace

DecayExclusions DecayExclusions::parse(std::string_view list) {
  DecayExclusions e;
  std::stringstream ss{std::string(list)};
  for (std::string item; std::getline(ss, item, ',');) {
    if (item == "bias") {
      e.bias = true;
    } else if (item == "norm") {
      e.norm = true;
    } else if (item == "embedding") {
      e.embedding = true;
    } else {
      MIXPREC_CHECK(false, ValueError, "weight decay",
                    "unknown entry '" << item << "' in --no-decay '" << list
                                      << "'; give a comma-separated list of bias, norm, embedding");
    }
  }
  return e;
}

std::vector<ParamGroup> weight_decay_groups(const nn::Module& model, float weight_decay,
                                            const DecayExclusions& exclude) {
  ParamGroup decay{"decay", {}, 1.0f, weight_decay};
  ParamGroup no_decay{"no_decay", {}, 1.0f, 0.0f};
  split(model, exclude, decay, no_decay);
  std::vector<ParamGroup> groups;
  if (!decay.params.empty()) groups.push_back(std::move(decay));
  if (!no_decay.params.empty()) groups.push_back(std::move(no_decay));
  return groups;
}

}  // namespace mixprec::optim
