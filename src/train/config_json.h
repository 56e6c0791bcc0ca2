#pragma once
// TrainConfig and EpochMetrics <-> JSON (nlohmann), for checkpoints and the JSONL log.
#include <nlohmann/json.hpp>

#include "mixprec/train/trainer.h"

namespace mixprec::train::detail {

nlohmann::json config_to_json(const TrainConfig& config);
/// ValueError naming `what` on missing keys or wrong types.
TrainConfig config_from_json(const nlohmann::json& j, const std::string& what);

nlohmann::json metrics_to_json(const EpochMetrics& m, models::TaskKind task);
EpochMetrics metrics_from_json(const nlohmann::json& j, const std::string& what);

/// The first field that differs in a way that changes the computation ("" if none), with both
/// values, e.g. "precision: checkpoint 'bf16', requested 'fp16'".
std::string first_incompatibility(const TrainConfig& saved, const TrainConfig& requested);

}  // namespace mixprec::train::detail
