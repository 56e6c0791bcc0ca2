#pragma once
// What a training checkpoint holds and how the Trainer's objects map to its files:
//   model.safetensors      parameters as FP32 (the optimizer's master where one exists) and
//                          buffers, under their module paths ("features.0.weight")
//   optimizer.safetensors  optimizer state tensors under "<module path>.<buffer>"
//                          ("features.0.weight.exp_avg"); masters live in model.safetensors
//   state.json             epoch, config, metrics history, optimizer scalars, GradScaler,
//                          scheduler and dropout counters
// plus MANIFEST.json with SHA-256 checksums (io/checkpoint.h).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/optim/lr_scheduler.h"
#include "mixprec/optim/optimizer.h"
#include "mixprec/train/train_step.h"
#include "mixprec/train/trainer.h"

namespace mixprec::train::detail {

/// The pieces of a run that a checkpoint captures (non-owning): the model, and the step's
/// optimizer, GradScaler and schedule.
struct TrainingObjects {
  nn::Module* model = nullptr;
  TrainStep* step = nullptr;
  /// encode_checkpoint: the step's full optimizer state (TrainStep::full_optimizer_state, which
  /// a sharded optimizer gathers from every rank before rank 0 encodes).
  const optim::OptimizerState* optimizer_state = nullptr;
  /// How the inputs were derived from the data files (train/data_schema.h), stored as
  /// state.json's "data_schema" when not null; nullptr or a null JSON: none.
  const nlohmann::json* data_schema = nullptr;
};

/// The running sums of an epoch the checkpoint was written inside of, stored exactly (as C99
/// hex floats in state.json: they may be Inf in fp16, which JSON numbers cannot hold), because
/// the history's means times their counts do not give the sums back bit for bit.
struct PartialSums {
  double loss_sum = 0;       ///< sum of the micro-batch losses (data parallel: mean over ranks)
  double norm_sum = 0;       ///< sum of the finite gradient norms
  std::int64_t norms = 0;    ///< how many finite gradient norms norm_sum holds
};

/// Serialises the objects after `epoch` (1-based) into checkpoint files.
/// `epoch` counts completed epochs; the last history entry may be a partial one (max_steps, a
/// periodic or a stop-signal checkpoint), whose exact sums `partial` then holds.
io::CheckpointFiles encode_checkpoint(const TrainingObjects& objects, const TrainConfig& config,
                                      const std::string& resolved_precision, models::TaskKind task,
                                      const std::vector<EpochMetrics>& history, int epoch,
                                      const PartialSums* partial = nullptr);

/// The parts of state.json the Trainer needs before building anything.
struct CheckpointHeader {
  TrainConfig config;
  std::string resolved_precision;
  int epoch = 0;
  std::vector<EpochMetrics> history;
  /// Written inside an epoch by this version: the exact sums (older checkpoints: none).
  std::optional<PartialSums> partial;
  nlohmann::json data_schema;  ///< null for runs on data that needs none
};
/// Parses state.json (ValueError naming `path` if it is malformed).
CheckpointHeader read_checkpoint_header(const io::CheckpointFiles& files, const std::string& path);

/// Restores the objects from checkpoint files written for the same model and configuration.
/// ValueError naming `path` and the offending entry if a tensor is missing, extra or ill-shaped.
void restore_checkpoint(const io::CheckpointFiles& files, const std::string& path,
                        const TrainingObjects& objects);

}  // namespace mixprec::train::detail
