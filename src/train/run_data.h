#pragma once
// The data of a run of a registered model, from TrainConfig::data: Fashion-MNIST, the synthetic
// set of the seed MLP, a text corpus cut into windows for a language model, a CSV table
// (classification or regression) or any MNIST-format IDX set. The last two decide the task and
// the model's input and output widths.
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
  /// csv and idx: the task the data asks for (else null: the model's own, make_task), the
  /// model's input and output widths, and how inputs were derived from the files (stored in
  /// checkpoints as "data_schema"; csv: data::TabularSchema, see train/data_schema.h).
  std::shared_ptr<Task> task;
  std::int64_t inputs = 0, outputs = 0;
  nlohmann::json schema;
};

/// Loads and checks the data a run asks for. ValueError naming the flag and the fix for a
/// source that does not fit the model (text for a classifier, images for a language model),
/// a missing or too short corpus, or bad files (naming the file, line and column).
RunData load_run_data(const models::ModelSpec& spec, const models::ModelOptions& resolved,
                      const TrainConfig& config);

}  // namespace mixprec::train::detail
