#pragma once
/// A trained model back from a checkpoint, without its data or optimizer: what `mixprec
/// generate` samples from, and what a user's program loads to run a model it trained.
#include <memory>
#include <optional>
#include <string>

#include "mixprec/core/dtype.h"
#include "mixprec/data/tabular.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/module.h"
#include "mixprec/train/trainer.h"

namespace mixprec::train {

struct CheckpointModel {
  std::string path;                 ///< the checkpoint directory actually read
  TrainConfig config;               ///< as stored (transformer sizes resolved)
  std::string precision;            ///< the precision mode it trained in, e.g. "bf16"
  models::ModelSpec spec;
  std::shared_ptr<nn::Module> model;  ///< in eval mode, parameters in the precision's storage dtypes
  /// The autocast region inference should run under: the training precision's compute dtype
  /// (autocast off for fp32).
  bool autocast = false;
  DType compute = DType::bf16;
  /// Runs on --data csv:PATH: how new rows become inputs (feature names, the training rows'
  /// statistics, the target and its classes or scaling); empty for other data.
  std::optional<data::TabularSchema> tabular;
};

/// Loads the checkpoint `path` names (a checkpoint or a directory of them: the newest complete
/// one), rebuilds its registered model with the stored sizes and seed, and loads its weights.
/// ValueError naming the path if it is not a training checkpoint or its model is not registered;
/// `expect` (if not empty) must equal the model's task kind name ("language-model"), else a
/// ValueError saying which model the checkpoint holds.
CheckpointModel load_checkpoint_model(const std::string& path, const std::string& expect_task = "");

}  // namespace mixprec::train
