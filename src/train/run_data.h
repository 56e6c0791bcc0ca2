#pragma once
// The data of a run of a registered model, from TrainConfig::data: Fashion-MNIST, the synthetic
// set of the seed MLP, or a text corpus cut into windows for a language model.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "mixprec/data/batch_source.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/trainer.h"

namespace mixprec::train::detail {

struct RunData {
  std::shared_ptr<data::BatchSource> train, eval;
  nlohmann::json description;  ///< source, sample counts (the log header's "data")
};

/// Loads and checks the data a run asks for. ValueError naming the flag and the fix for a
/// source that does not fit the model (text for a classifier, images for a language model),
/// a missing or too short corpus, or bad files.
RunData load_run_data(const models::ModelSpec& spec, const models::ModelOptions& resolved,
                      const TrainConfig& config);

}  // namespace mixprec::train::detail
