// `mixprec eval`: evaluates a checkpoint on the test set.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixprec/train/trainer.h"

namespace mixprec::tools {

void add_eval_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on the test set: accuracy, macro-F1 and a per-class table (a "
      "language model: validation loss, perplexity and bits per byte; regression: MSE and R²). "
      "Runs on --data csv: or idx: read the data the checkpoint names again");
  struct Args {
    std::string checkpoint, data_dir;
    std::int64_t limit_test = -1;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--checkpoint", a->checkpoint,
                  "A checkpoint directory, or a directory of checkpoints (the newest complete one "
                  "is used)")
      ->required();
  cmd->add_option("--data-dir", a->data_dir, "Fashion-MNIST directory (default: the one trained on)");
  cmd->add_option("--limit-test", a->limit_test, "Use only the first N test samples");
  cmd->add_flag("--json", a->json, "Print JSON instead of text");
  cmd->callback([a] {
    const train::CheckpointEvaluation e = train::evaluate_checkpoint(a->checkpoint, a->data_dir, a->limit_test);
    if (e.task == models::TaskKind::language_model) {
      const train::EpochMetrics& m = e.metrics;
      if (a->json) {
        nlohmann::json j{{"checkpoint", e.path}, {"model", e.config.model},
                         {"precision", e.config.precision}, {"epoch", e.epoch},
                         {"val_loss", m.test_loss}, {"perplexity", m.perplexity},
                         {"bits_per_byte", m.bits_per_byte}};
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        std::printf("checkpoint %s: model %s, precision %s, after epoch %d\n", e.path.c_str(),
                    e.config.model.c_str(), e.config.precision.c_str(), e.epoch);
        std::printf("validation loss %.4f  perplexity %.3f  %.4f bits/byte\n", m.test_loss,
                    m.perplexity, m.bits_per_byte);
      }
      return;
    }
    if (e.task == models::TaskKind::regression) {
      const train::EpochMetrics& m = e.metrics;
      if (a->json) {
        nlohmann::json j{{"checkpoint", e.path}, {"model", e.config.model},
                         {"precision", e.config.precision}, {"epoch", e.epoch},
                         {"task", "regression"}, {"test_loss", m.test_loss},
                         {"mse", m.mse}, {"r2", m.r2}};
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        std::printf("checkpoint %s: model %s, precision %s, after epoch %d\n", e.path.c_str(),
                    e.config.model.c_str(), e.config.precision.c_str(), e.epoch);
        std::printf("regression: test MSE %.6g  R2 %.4f  (loss %.4f on standardised targets)\n", m.mse, m.r2,
                    m.test_loss);
      }
      return;
    }
    const train::ConfusionMatrix& cm = e.confusion;
    const bool fashion = e.config.model != "seed-mlp" &&
                         (e.config.data.empty() || e.config.data == "fashion-mnist");
    if (a->json) {
      nlohmann::json j{{"checkpoint", e.path}, {"model", e.config.model},
                       {"precision", e.config.precision}, {"epoch", e.epoch},
                       {"samples", cm.total()}, {"test_loss", e.test_loss},
                       {"accuracy", cm.accuracy()}, {"macro_f1", cm.macro_f1()}};
      for (std::int64_t c = 0; c < cm.num_classes(); ++c) {
        j["per_class"].push_back({{"class", fashion ? train::fashion_mnist_classes()[static_cast<std::size_t>(c)]
                                                    : std::to_string(c)},
                                  {"precision", cm.precision(c)}, {"recall", cm.recall(c)},
                                  {"f1", cm.f1(c)}});
      }
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    std::printf("checkpoint %s: model %s, precision %s, after epoch %d\n", e.path.c_str(),
                e.config.model.c_str(), e.config.precision.c_str(), e.epoch);
    std::printf("test samples %lld  loss %.4f  accuracy %.4f  macro-F1 %.4f\n\n",
                static_cast<long long>(cm.total()), e.test_loss, cm.accuracy(), cm.macro_f1());
    std::fputs(cm.per_class_table(fashion ? train::fashion_mnist_classes() : std::vector<std::string>{}).c_str(),
               stdout);
  });
}

}  // namespace mixprec::tools
