#include "mixprec/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "mixprec/runtime/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/precision.h"
#include "mixprec/runtime/anomaly.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/data_parallel.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/fp8_layers.h"
#include "train/progress.h"
#include "train/stop_signal.h"

#include "train/epoch_tally.h"
#include "train/trainer_state.h"

namespace mixprec::train {
namespace {

using nlohmann::json;

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

/// The JSONL epoch line's "fp8" object: layer path -> role -> the report's numbers (the
/// fractions null when no cast of the role was observed).
std::string fp8_summary(const std::vector<nn::Fp8LayerReport>& layers) {
  json out = json::object();
  for (const nn::Fp8LayerReport& l : layers) {
    json roles = json::object();
    for (const nn::Fp8RoleReport& r : l.roles) {
      roles[r.role] = {{"amax", finite_or_null(r.amax)},
                       {"amax_history", finite_or_null(r.history_amax)},
                       {"scale", r.scale},
                       {"saturated", r.observed ? json(r.saturated) : json(nullptr)},
                       {"flushed", r.observed ? json(r.flushed) : json(nullptr)}};
    }
    out[l.path] = roles;
  }
  return out.dump();
}
constexpr const char* kOp = "train";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string Trainer::State::write_checkpoint(const std::string& name, const std::vector<EpochMetrics>& hist,
                                            int completed, const detail::PartialSums* sums) {
  const TrainConfig& c = config;
  // A sharded optimizer's full state is gathered from every rank before rank 0 writes it.
  const optim::OptimizerState full_state = step->full_optimizer_state();
  std::string path;
  dist::agree(*comm, "writing the checkpoint", [&] {
    if (!writer()) return;
    const std::vector<std::string> before = io::list_checkpoints(c.checkpoint_dir);
    try {
      path = io::save_checkpoint(c.checkpoint_dir, name,
                                 detail::encode_checkpoint(objects(&full_state), c, step->precision_name(),
                                                           task->kind(), hist, completed, sums));
    } catch (const ValueError& e) {
      // save_checkpoint builds the new one in a hidden directory and renames it into place only
      // when complete, so whatever failed (disk full, a file in the way) left the old ones alone.
      MIXPREC_CHECK(false, ValueError, kOp,
                    "could not write checkpoint '" << name << "' (" << e.what() << "); "
                        << (before.empty() ? "no earlier checkpoint exists in '" + c.checkpoint_dir + "'"
                                           : "the previous checkpoint '" + before.back() +
                                                 "' is intact: free space or fix the directory, then "
                                                 "resume with --resume " + c.checkpoint_dir));
    }
    if (c.keep_checkpoints > 0) io::prune_checkpoints(c.checkpoint_dir, static_cast<std::size_t>(c.keep_checkpoints));
  });
  return path;
}

Trainer::~Trainer() = default;

const TrainConfig& Trainer::config() const { return s_->config; }
const std::string& Trainer::resolved_precision() const { return s_->step->precision_name(); }
nn::Module& Trainer::model() { return *s_->model; }
int Trainer::next_epoch() const { return s_->next_epoch; }
const std::optional<Interruption>& Trainer::interruption() const { return s_->interruption; }
const Task& Trainer::task() const { return *s_->task; }

EpochMetrics Trainer::evaluate_metrics(ConfusionMatrix* confusion) {
  EpochMetrics m;
  const std::unique_ptr<Evaluation> e = s_->evaluate();
  e->write(m);
  if (confusion != nullptr && e->confusion() != nullptr) *confusion = *e->confusion();
  return m;
}

ConfusionMatrix Trainer::evaluate(double* mean_loss) {
  const std::unique_ptr<Evaluation> e = s_->evaluate();
  MIXPREC_CHECK(e->confusion() != nullptr, ValueError, kOp,
                "a confusion matrix needs a classification task; this run is a "
                    << models::name(s_->task->kind()));
  if (mean_loss != nullptr) {
    EpochMetrics m;
    e->write(m);
    *mean_loss = m.test_loss;
  }
  return *e->confusion();
}

std::unique_ptr<Evaluation> Trainer::State::evaluate() {
  runtime::NoGradGuard no_grad;
  model->eval();
  const runtime::UseWeightCopies copies(step->weight_copies());
  runtime::Autocast region(step->autocast(), step->compute_dtype());
  std::unique_ptr<Evaluation> e = task->evaluation();
  eval->start_epoch(0);
  for (data::Batch batch; eval->next(batch);) e->add((*model)(batch.inputs), batch);
  model->train();
  return e;
}

std::vector<EpochMetrics> Trainer::run() {
  State& s = *s_;
  const TrainConfig& c = s.config;
  if (on_message) {
    if (s.log_header.contains("auto_precision_reason")) {
      on_message("auto precision: " + s.log_header["auto_precision_reason"].get<std::string>());
    }
    const std::string warnings =
        amp::precision_warnings(s.step->mode(), s.step->scaler().is_enabled(), cpu_features());
    if (!warnings.empty()) on_message(warnings);
  }
  runtime::DetectAnomaly anomaly(c.detect_anomaly);
  amp::GradScaler& scaler = s.step->scaler();
  optim::Optimizer& optimizer = s.step->optimizer();
  s.interruption.reset();
  const detail::StopSignals signals(handle_stop_signals);
  // Collective under mpirun: mpirun forwards SIGTERM to every rank, but each may see it at a
  // different step, so they take the largest flag and stop together. One process: a load.
  auto stop_signal = [&]() -> int {
    if (!handle_stop_signals) return 0;
    if (s.comm->size() == 1) return signals.received();
    return static_cast<int>(s.comm->allreduce_max(static_cast<double>(signals.received())));
  };
  // Named by completed epochs, then the step inside the next one, so names sort by age.
  auto step_name = [&](int completed) {
    char name[48];
    std::snprintf(name, sizeof name, "epoch-%04d-step-%08lld", completed, static_cast<long long>(s.steps_taken()));
    return std::string(name);
  };
  s.model->train();
  bool stop = false;
  for (int epoch = s.next_epoch; epoch <= c.epochs && !stop; ++epoch) {
    reset_peak_memory();
    EpochMetrics m;
    m.epoch = epoch;
    detail::EpochTally tally;
    tally.skipped_before = scaler.stats().skipped_steps;
    const std::int64_t first_batch = s.partial ? s.first_batch : 0;
    if (s.partial) {
      tally.continue_from(*s.partial, s.partial_sums, c.accum, s.comm->size());
      s.partial.reset();
      s.partial_sums.reset();
    }
    std::chrono::steady_clock::time_point t0;
    // The training half of the epoch's metrics, as they stand after `more` says whether batches
    // are left. Collective under mpirun (the mean loss over ranks).
    auto training_metrics = [&](bool more) {
      tally.flush_norms();
      m.complete = !more;
      m.epoch_batches = tally.micro;
      m.train_seconds = tally.seconds_before + seconds_since(t0);
      m.nonfinite_losses = tally.nonfinite;
      m.train_loss = dist::mean_over_ranks(*s.comm, tally.mean_loss());
      m.train_samples = tally.samples * s.comm->size();
      m.samples_per_second = static_cast<double>(m.train_samples) / m.train_seconds;
      m.grad_norm_mean = tally.norms > 0 ? tally.norm_sum / static_cast<double>(tally.norms) : 0.0;
      m.grad_norm_max = tally.norm_max;
      m.skipped_steps = scaler.stats().skipped_steps - tally.skipped_before;
      m.loss_scale = scaler.get_scale();
      m.lr = optimizer.lr();
      m.optimizer_steps = optimizer.steps();
      if (const PrecisionAutopilot* pilot = s.step->autopilot()) {
        m.flops_16bit = pilot->sixteen_bit_flop_share();
        m.layer_dtypes.clear();
        for (const auto& [path, d] : pilot->policy().layers) {
          m.layer_dtypes += (m.layer_dtypes.empty() ? "" : ",") + path + "=" + layer_dtype_name(d);
        }
      }
      if (const nn::Fp8Layers* fp8 = s.step->fp8_layers()) m.fp8 = fp8_summary(fp8->report());
    };
    // Collective: the exact sums of the epoch so far (data parallel: the losses' mean over the
    // ranks, so that a resume on any number of ranks continues from the global figure).
    auto partial_sums = [&] {
      tally.flush_norms();
      const double losses =
          s.comm->size() == 1 ? tally.loss_sum : s.comm->allreduce_sum(tally.loss_sum) / s.comm->size();
      return detail::PartialSums{losses, tally.norm_sum, tally.norms};
    };
    // A checkpoint inside this epoch with its metrics so far, without an evaluation pass (too
    // slow to run every N steps, or within a preemption's grace period) and without a log line:
    // the log only ever shows finished epochs and --max-steps stops.
    auto checkpoint_inside = [&](bool more) {
      training_metrics(more);
      std::vector<EpochMetrics> hist = s.history;
      hist.push_back(m);
      hist.back().complete = false;
      const detail::PartialSums sums = partial_sums();
      return s.write_checkpoint(step_name(epoch - 1), hist, epoch - 1, &sums);
    };
    s.train->start_epoch(epoch - 1, first_batch);
    detail::ProgressBar bar(c.progress, "epoch " + std::to_string(epoch) + "/" + std::to_string(c.epochs),
                            s.train->batches_per_epoch());
    t0 = std::chrono::steady_clock::now();
    int signal = 0;
    data::Batch batch;
    bool more = s.train->next(batch);
    bool first_step = true;  // of this epoch in this process: its fp8 casts are counted
    while (more && !stop && signal == 0) {
      // One optimizer step over up to `accum` micro-batches (the epoch's last step may have fewer).
      int in_step = 0;
      double step_loss = 0;
      runtime::set_anomaly_step(optimizer.steps());
      // fp8: the casts of the epoch's first step and of the TensorBoard histogram steps are
      // counted (saturated, flushed), the other steps' are not (the count downloads every
      // operand).
      nn::Fp8Layers* const fp8 = s.step->fp8_layers();
      const bool fp8_report = fp8 != nullptr && s.tensorboard && s.tensorboard->histograms_due(s.steps_taken());
      const bool fp8_observe = fp8 != nullptr && (fp8_report || first_step);
      if (fp8_observe) fp8->set_observe(true);
      first_step = false;
      while (more && in_step < c.accum) {
        const double value = s.step->accumulate(batch, [&](const data::Batch& b) {
          // The logits are this lambda's temporary: the fused loss keeps their gradient, not
          // them, so they are freed before backward. `b` is `batch`, or its static copy in a
          // captured graph (--cuda-graphs on).
          return s.task->training_loss((*s.model)(b.inputs), b, s.step->loss_gradient());
        });
        MIXPREC_CHECK(std::isfinite(value) || scaler.is_enabled(), ValueError, kOp,
                      "the loss became " << value << " at epoch " << epoch << ", batch "
                                         << batch.index << " (" << s.step->precision_name()
                                         << "); training diverged: lower --lr, set --clip, or "
                                            "resume from the last checkpoint");
        tally.add_loss(value, batch.inputs.size(0));
        step_loss += value;
        ++in_step;
        more = s.train->next(batch);
      }
      // Data parallel: the step averages the gradients over the ranks before unscaling.
      const Tensor norm_tensor = s.step->unscale_and_clip();
      // The norm stays on the device until a log needs it: TensorBoard's per-step scalar reads
      // it now; otherwise it waits in the tally's device buffer for the epoch's figures.
      float norm = 0.0f;
      if (s.tensorboard) {
        const TransferReason why("tensorboard scalars");
        norm = norm_tensor.item();
        tally.add_norm(norm);
      } else {
        tally.add_norm(norm_tensor);
      }
      const std::int64_t step_index = s.steps_taken();
      const double lr_used = optimizer.lr(), scale_used = scaler.get_scale();
      if (s.tensorboard && s.tensorboard->histograms_due(step_index)) {
        // Sharded, rank 0 holds the averaged gradients of its own share only: weights alone.
        s.tensorboard->histograms(step_index, scale_used, s.step->shards() == nullptr);
      }
      const bool applied = s.step->apply();
      if (const PrecisionAutopilot* pilot = s.step->autopilot()) s.announce_moves(*pilot, on_message);
      if (s.tensorboard) {
        s.tensorboard->step(step_index, step_loss / in_step, lr_used, scale_used, norm, !applied);
      }
      if (fp8_report) s.tensorboard->fp8(step_index, fp8->report());
      if (fp8_observe) fp8->set_observe(false);
      if (c.max_steps > 0 && s.steps_taken() >= c.max_steps) stop = true;
      if (!stop) signal = stop_signal();
      // The epoch's last step is followed by the epoch's own checkpoint.
      if (!stop && signal == 0 && more && c.checkpoint_every_steps > 0 && s.steps_taken() % c.checkpoint_every_steps == 0) {
        checkpoint_inside(more);
      }
      char status[96];
      std::snprintf(status, sizeof status, "loss %.4f", tally.mean_loss());
      bar.update(tally.micro - first_batch, status);
    }
    bar.finish();
    if (signal != 0 && more) {
      // Stopped inside the epoch: its checkpoint, then out. (At the epoch's end the epoch's own
      // checkpoint below serves.)
      const std::string path = c.checkpoint_dir.empty() ? std::string() : checkpoint_inside(more);
      s.interruption = Interruption{signal, epoch, s.steps_taken(), path};
      s.next_epoch = epoch;
      break;
    }
    training_metrics(more);
    const auto t_eval = std::chrono::steady_clock::now();
    s.evaluate()->write(m);
    m.eval_seconds = seconds_since(t_eval);
    m.memory = memory_stats();
    s.history.push_back(m);
    s.next_epoch = m.complete ? epoch + 1 : epoch;

    std::string checkpoint;
    if (!c.checkpoint_dir.empty()) {
      if (m.complete) {
        char name[48];
        std::snprintf(name, sizeof name, "epoch-%04d", epoch);
        checkpoint = s.write_checkpoint(name, s.history, epoch, nullptr);
      } else {
        const detail::PartialSums sums = partial_sums();
        checkpoint = s.write_checkpoint(step_name(epoch - 1), s.history, epoch - 1, &sums);
      }
    }
    if (!c.log_path.empty() && s.writer()) {
      // The whole log is rewritten atomically: a crash never leaves a torn line behind.
      io::write_file_atomically(c.log_path, s.log_text());
    }
    if (const PrecisionAutopilot* pilot = s.step->autopilot(); pilot && !c.policy_out.empty() && s.writer()) {
      LayerPolicy p = pilot->policy();
      p.model = c.model;
      p.write(c.policy_out);
    }
    if (s.tensorboard) {
      json line = detail::metrics_to_json(m, s.task->kind());
      s.tensorboard->epoch(epoch, line);
    }
    if (on_epoch) on_epoch(m);
    // A signal at the epoch's last step, or during its evaluation or checkpoint: stop here, at
    // the checkpoint just written, unless the run is over anyway.
    if (signal == 0 && !stop && epoch < c.epochs) signal = stop_signal();
    if (signal != 0 && epoch < c.epochs) {
      s.interruption = Interruption{signal, epoch, s.steps_taken(), checkpoint};
      break;
    }
  }
  if (on_message && c.cuda_graphs == "on") {
    // What --cuda-graphs did, in one line (a refusal was printed when it happened).
    const TrainStep::GraphStats g = s.step->graph_stats();
    on_message("cuda graphs: " + std::to_string(g.captures) + " captured, " +
               std::to_string(g.replays) + " micro-batches replayed" +
               (g.refusal.empty() ? "" : " (then without: " + g.refusal + ")"));
  }
  // Ranks leave together: rank 0 may still be writing its checkpoint (dist/world.h: ranks that
  // reach exit far apart are ended as failed).
  s.comm->barrier();
  return s.history;
}

TrainConfig checkpoint_config(const std::string& path) {
  const std::string resolved = io::resolve_checkpoint(path);
  return detail::read_checkpoint_header(io::load_checkpoint(resolved), resolved).config;
}

CheckpointEvaluation evaluate_checkpoint(const std::string& path, const std::string& data_dir,
                                         std::int64_t limit_test) {
  CheckpointEvaluation out;
  out.path = io::resolve_checkpoint(path);
  const io::CheckpointFiles files = io::load_checkpoint(out.path);
  const detail::CheckpointHeader h = detail::read_checkpoint_header(files, out.path);
  TrainConfig c = h.config;
  out.config = c;
  out.epoch = h.epoch;
  c.resume = out.path;
  c.epochs = std::max(c.epochs, h.epoch + 1);  // evaluation only: no epoch is trained
  c.log_path.clear();
  c.tensorboard.clear();
  c.checkpoint_dir.clear();
  c.checkpoint_every_steps = 0;
  if (!data_dir.empty()) c.data_dir = data_dir;
  if (limit_test > 0) c.limit_test = limit_test;
  c.limit_train = h.config.limit_train;
  c.max_steps = -1;
  Trainer trainer(c);
  out.task = trainer.task().kind();
  out.metrics = trainer.evaluate_metrics(&out.confusion);
  out.test_loss = out.metrics.test_loss;
  return out;
}

}  // namespace mixprec::train
