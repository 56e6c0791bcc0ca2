// `mixprec train`: trains a built-in model and prints one line per epoch.
#include <cstdio>

#include "commands.h"
#include "mixprec/core/memory.h"
#include "mixprec/models/zoo.h"
#include "train_options.h"

namespace mixprec::tools {

void add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model (Fashion-MNIST, or synthetic data for seed-mlp) in a precision mode, with "
      "evaluation, checkpoints and a JSONL log after every epoch");
  auto options = std::make_shared<TrainOptions>(cmd, /*with_run_flags=*/true);
  cmd->footer(
      "Examples:\n"
      "  mixprec train --model cnn --precision bf16 --epochs 3\n"
      "  mixprec train --model mlp --precision fp16 --checkpoint-dir ckpt --log run.jsonl\n"
      "  mixprec train --resume ckpt --epochs 5      # continue the newest checkpoint in ckpt/");
  cmd->callback([options] {
    const train::TrainConfig config = options->resolve();
    train::Trainer trainer(config);
    trainer.on_message = [](const std::string& text) { std::printf("%s\n", text.c_str()); };
    trainer.on_epoch = [&](const train::EpochMetrics& m) {
      std::printf("epoch %d/%d  loss %.4f  test acc %.4f  macro-F1 %.4f  %.0f samples/s  "
                  "%.1f s  peak %s (activations %s)  scale %g  skipped %lld  |g| %.3g  lr %.3g\n",
                  m.epoch, config.epochs, m.train_loss, m.test_accuracy, m.macro_f1,
                  m.samples_per_second, m.train_seconds, format_mib(m.memory.total_peak).c_str(),
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
  });
}

}  // namespace mixprec::tools
