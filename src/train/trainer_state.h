#pragma once
// What a Trainer holds between its constructor and run(): the model, the data, the one TrainStep,
// the history and the run's files. Internal: shared by trainer_setup.cpp (construction, resume)
// and trainer.cpp (the training loop).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixprec/dist/communicator.h"
#include "mixprec/dist/world.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/directory_lock.h"
#include "mixprec/train/precision_autopilot.h"
#include "mixprec/train/train_step.h"
#include "mixprec/train/trainer.h"
#include "train/config_json.h"
#include "train/tensorboard_log.h"
#include "train/train_checkpoint.h"

namespace mixprec::train {

struct Trainer::State {
  TrainConfig config;
  std::string model_description;
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<data::BatchSource> train, eval;
  std::shared_ptr<Task> task;
  std::unique_ptr<TrainStep> step;  // precision, optimizer, scaler, schedule: the one step
  std::vector<EpochMetrics> history;
  int next_epoch = 1;
  // A checkpoint written inside an epoch (a max_steps stop): the batches of next_epoch already
  // trained, and that epoch's partial metrics to continue from.
  std::int64_t first_batch = 0;
  std::optional<EpochMetrics> partial;
  std::optional<detail::PartialSums> partial_sums;  // exact; absent in older checkpoints
  std::optional<Interruption> interruption;         // the last run() stopped by a signal
  std::string resumed_from;
  // The checkpoint files read (and verified) for the early compatibility check, kept so that
  // set_up does not read and hash them a second time.
  std::optional<io::CheckpointFiles> resume_files;
  nlohmann::json log_header;
  std::unique_ptr<detail::TensorBoardLog> tensorboard;  // rank 0 with --tensorboard
  std::size_t moves_reported = 0;  // auto-layer: the autopilot's moves already announced
  // Rank 0 with --checkpoint-dir: no other process writes checkpoints there while this one runs.
  std::unique_ptr<io::DirectoryLock> checkpoint_lock;
  // The ranks of a data-parallel run (one process: SingleProcess); rank 0 writes files.
  const dist::Communicator* comm = &dist::world();
  bool writer() const { return comm->rank() == 0; }

  // csv/idx: how inputs were derived from the files, for checkpoints (train/data_schema.h).
  nlohmann::json data_schema;

  detail::TrainingObjects objects(const optim::OptimizerState* optimizer_state = nullptr) {
    return {model.get(), step.get(), optimizer_state, &data_schema};
  }
  std::int64_t steps_per_epoch() const {
    return (train->batches_per_epoch() + config.accum - 1) / config.accum;
  }
  // Optimizer steps taken, including the ones the scaler skipped: what max_steps counts.
  std::int64_t steps_taken() {
    return step->optimizer().steps() + step->scaler().stats().skipped_steps;
  }

  // Collective (data parallel): writes checkpoint `name` holding `hist` after `completed`
  // epochs (inside the next one when `sums` is given) and prunes old ones; rank 0 writes, all
  // ranks agree on how it went. Returns the checkpoint's path. A failure names what failed and
  // the previous checkpoint, which the atomic save left intact.
  std::string write_checkpoint(const std::string& name, const std::vector<EpochMetrics>& hist, int completed,
                               const detail::PartialSums* sums);

  // Collective (data parallel): what both constructors share after the job is agreed. Runs its
  // local part on every rank, then the ranks agree on how it went (one failing rank stops all).
  void set_up(nlohmann::json data_description);
  void set_up_locally(nlohmann::json data_description);
  // One evaluation pass in eval mode; the model is left in training mode.
  std::unique_ptr<Evaluation> evaluate();
  // auto-layer: prints the autopilot's moves not yet announced.
  void announce_moves(const PrecisionAutopilot& pilot, const std::function<void(const std::string&)>& out) {
    const std::vector<LayerMove>& moves = pilot.moves();
    for (; moves_reported < moves.size(); ++moves_reported) {
      const LayerMove& m = moves[moves_reported];
      if (out && writer()) {
        out("autopilot: after step " + std::to_string(m.step) + ", " + m.layer + " " + layer_dtype_name(m.from) +
            " -> " + layer_dtype_name(m.to) + ": " + m.reason);
      }
    }
  }
  // The JSONL log: the header; auto-layer's moves so far, one line each (with their step);
  // then one line per epoch.
  std::string log_text() const {
    using nlohmann::json;
    std::string text = log_header.dump() + "\n";
    if (const PrecisionAutopilot* pilot = step->autopilot()) {
      for (const LayerMove& m : pilot->moves()) {
        text += json{{"type", "precision_move"}, {"step", m.step}, {"layer", m.layer},
                     {"from", layer_dtype_name(m.from)}, {"to", layer_dtype_name(m.to)}, {"reason", m.reason}}
                    .dump() +
                "\n";
      }
    }
    for (const EpochMetrics& h : history) {
      json line = detail::metrics_to_json(h, task->kind());
      line["type"] = "epoch";
      text += line.dump() + "\n";
    }
    return text;
  }
};

}  // namespace mixprec::train
