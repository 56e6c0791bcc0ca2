#pragma once
/// The usual weight-decay recipe of transformer training (GPT-2/3, nanoGPT): decay the weight
/// matrices, not the biases, the normalisation layers' scales and shifts, or the embeddings.
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/nn/module.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

/// What is kept out of weight decay, parsed from a comma-separated list of "bias" (parameters
/// named "bias"), "norm" (every parameter of a module whose type name contains "Norm": LayerNorm,
/// BatchNorm2d, ...) and "embedding" (every parameter of a module whose type name contains
/// "Embedding"); "" keeps nothing out. ValueError naming an unknown entry.
struct DecayExclusions {
  bool bias = false, norm = false, embedding = false;
  static DecayExclusions parse(std::string_view list);
  bool any() const { return bias || norm || embedding; }
};

/// Two groups over model.parameters(): "decay" (weight_decay) and "no_decay" (0), the latter
/// holding what `exclude` names. A group left empty is omitted.
std::vector<ParamGroup> weight_decay_groups(const nn::Module& model, float weight_decay,
                                            const DecayExclusions& exclude);

}  // namespace mixprec::optim
