// `mixprec train`: trains a built-in model and prints one line per epoch.
#include <csignal>
#include <cstdio>
#include <optional>

#include "commands.h"
#include "mixprec/core/memory.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/world.h"
#include "mixprec/models/zoo.h"
#include "train_options.h"

namespace mixprec::tools {

namespace {

// After a stop signal: one line saying what happened and how to go on (rank 0), then the exit
// status a shell gives a process that signal killed, 128 + its number (SIGTERM 143, SIGINT 130),
// so that schedulers and scripts see an interrupted run, not a finished one.
void exit_if_interrupted(const train::Trainer& trainer) {
  const std::optional<train::Interruption>& stop = trainer.interruption();
  if (!stop) return;
  if (dist::world().rank() == 0) {
    const train::TrainConfig& c = trainer.config();
    const char* name = stop->signal == SIGTERM ? "SIGTERM" : stop->signal == SIGINT ? "SIGINT" : "a signal";
    const std::string where = "after optimizer step " + std::to_string(stop->steps) + " (epoch " +
                              std::to_string(stop->epoch) + " of " + std::to_string(c.epochs) + ")";
    if (stop->checkpoint.empty()) {
      std::fprintf(stderr,
                   "mixprec: %s: stopped %s; nothing was saved (no --checkpoint-dir), so training "
                   "would start again from the beginning\n",
                   name, where.c_str());
    } else {
      const std::string launcher =
          dist::world().size() > 1 ? "mpirun -np " + std::to_string(dist::world().size()) + " " : "";
      std::fprintf(stderr, "mixprec: %s: stopped %s and saved checkpoint '%s'; resume with: %smixprec train --resume %s\n",
                   name, where.c_str(), stop->checkpoint.c_str(), launcher.c_str(), c.checkpoint_dir.c_str());
    }
    std::fflush(stderr);
  }
  // CLI11 ends the program with this status without printing anything.
  throw CLI::RuntimeError(128 + stop->signal);
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model (Fashion-MNIST, synthetic data for seed-mlp, text for gpt-mini, or your own "
      "table or MNIST-format images) in a precision mode, with evaluation, checkpoints and a JSONL "
      "log after every epoch");
  auto options = std::make_shared<TrainOptions>(cmd, /*with_run_flags=*/true);
  cmd->footer(
      "Examples:\n"
      "  mixprec train --model cnn --precision bf16 --epochs 3\n"
      "  mixprec train --model mlp --precision fp16 --checkpoint-dir ckpt --log run.jsonl\n"
      "  mixprec train --resume ckpt --epochs 5      # continue the newest checkpoint in ckpt/\n"
      "  mixprec train --model cnn --checkpoint-dir ckpt --checkpoint-every-steps 200  # SIGTERM-safe\n"
      "  mixprec train --model gpt-mini --precision bf16 --max-steps 300 --checkpoint-dir gpt\n"
      "  mixprec train --model gpt-mini --data text:book.txt --context 256 --layers 6 --width 192\n"
      "  mixprec train --model mlp --data csv:iris.csv --target species --epochs 30 --checkpoint-dir iris\n"
      "  mixprec train --model mlp --data csv:houses.csv --target price --task regression --test-data csv:test.csv\n"
      "  mixprec train --model mlp --data idx:mnist --epochs 3     # train-images-idx3-ubyte[.gz] etc.");
  cmd->callback([options] {
    // Under mpirun every rank resolves the flags, reading --resume's checkpoint for the flags not
    // given; if that fails on any rank (the checkpoint is missing or damaged on one node), every
    // rank stops with the same message naming the first rank that failed.
    train::TrainConfig config;
    dist::agree(dist::world(), "reading the flags and the --resume checkpoint's configuration",
                [&] { config = options->resolve(); });
    train::Trainer trainer(config);
    // SIGTERM (a scheduler's preemption notice) or SIGINT (Ctrl-C) stops at the next step
    // boundary with a checkpoint; a second one exits at once.
    trainer.handle_stop_signals = true;
    // Under mpirun every rank trains; rank 0 speaks for the job.
    if (dist::world().rank() != 0) {
      trainer.run();
      exit_if_interrupted(trainer);
      return;
    }
    trainer.on_message = [](const std::string& text) { std::printf("%s\n", text.c_str()); };
    const bool lm = trainer.task().kind() == models::TaskKind::language_model;
    const bool regression = trainer.task().kind() == models::TaskKind::regression;
    trainer.on_epoch = [&](const train::EpochMetrics& m) {
      char eval[128];
      if (lm) {
        std::snprintf(eval, sizeof eval, "val loss %.4f  ppl %.3f  %.4f bits/byte  %.0f tokens/s",
                      m.test_loss, m.perplexity, m.bits_per_byte,
                      m.samples_per_second * static_cast<double>(trainer.config().context));
      } else if (regression) {
        std::snprintf(eval, sizeof eval, "test MSE %.6g  R2 %.4f  %.0f samples/s", m.mse, m.r2,
                      m.samples_per_second);
      } else {
        std::snprintf(eval, sizeof eval, "test acc %.4f  macro-F1 %.4f  %.0f samples/s", m.test_accuracy,
                      m.macro_f1, m.samples_per_second);
      }
      std::printf("epoch %d/%d%s  step %lld  loss %.4f  %s  "
                  "%.1f s  peak %s (activations %s)  scale %g  skipped %lld  |g| %.3g  lr %.3g\n",
                  m.epoch, config.epochs, m.complete ? "" : " (stopped at --max-steps)",
                  static_cast<long long>(m.optimizer_steps), m.train_loss, eval,
                  m.train_seconds, format_mib(m.memory.total_peak).c_str(),
                  format_mib(m.memory.peak_of(MemoryCategory::activation)).c_str(), m.loss_scale,
                  static_cast<long long>(m.skipped_steps), m.grad_norm_mean, m.lr);
      std::fflush(stdout);
    };
    std::printf("train: %s (%lld parameters), precision %s, %s, batch %lld x %d, lr %g, seed %llu%s\n",
                config.model.c_str(), static_cast<long long>(trainer.model().parameter_count()),
                trainer.resolved_precision().c_str(), config.optimizer.c_str(),
                static_cast<long long>(config.batch_size), config.accum,
                static_cast<double>(config.lr), static_cast<unsigned long long>(config.seed),
                trainer.next_epoch() > 1
                    ? (", resuming at epoch " + std::to_string(trainer.next_epoch())).c_str()
                    : "");
    std::fflush(stdout);
    trainer.run();
    exit_if_interrupted(trainer);
  });
}

}  // namespace mixprec::tools
