#pragma once
// Training checkpoints written by an older layout of the model (before MultiHeadAttention's
// q_proj, k_proj and v_proj became one qkv_proj): what restore_checkpoint needs besides
// Module::upgrade_state on the weight and optimizer files, which are keyed by parameter path.
// Two things in a checkpoint are not: the optimizer's per-parameter scalars (state.json,
// "param.<index>.<name>", indexed in the order of the model's parameters), and the fp8 layers'
// scaling state (fp8.safetensors, "<layer>.fp8_<role>_<field>", per layer, not per parameter).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/nn/module.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::train::detail {

/// The model's parameter paths as the older layout ordered them: each merge's run of
/// parameters ("x.qkv_proj.weight", "x.qkv_proj.bias") becomes the same run under each of the
/// modules it was merged from, in order ("x.q_proj.weight", "x.q_proj.bias", "x.k_proj...").
std::vector<std::string> older_parameter_paths(const std::vector<std::string>& paths,
                                               const std::vector<nn::StateMerge>& merges);

/// Re-indexes the optimizer's per-parameter scalars ("param.<i>.step", "param.<i>.group")
/// from the older order to today's; a merged parameter takes the value its parts share.
/// Others pass unchanged. ValueError naming `path` when the parts disagree (they were stepped
/// or grouped apart: no one value is faithful) or an index is beyond the older model.
std::vector<std::pair<std::string, double>> upgrade_optimizer_scalars(
    const std::vector<std::pair<std::string, double>>& scalars, const std::vector<std::string>& paths,
    const std::vector<nn::StateMerge>& merges, const std::string& path);

/// Merges the fp8 state of the layers each merge joined: the amax histories and last amaxes
/// elementwise by max, the scales by min. That is the state the one layer would have: its
/// input is the one they shared, its weight and gradient the three side by side, so each
/// step's amax is the largest of theirs, and a scale chosen from a larger amax is the smaller
/// one. Layers of which not all were in fp8 pass unchanged (the restore names what is missing
/// if this run needs it); ValueError naming `path` when both layouts are there.
void upgrade_fp8_state(std::map<std::string, Tensor>& saved, const std::vector<nn::StateMerge>& merges,
                       const std::string& path);

}  // namespace mixprec::train::detail
