// `mixprec parity`: the same model and seed trained under several precisions, side by side, with
// a verdict: does each precision reach fp32's (or the first listed precision's) test accuracy
// within a tolerance?
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/error.h"
#include "train_options.h"

namespace mixprec::tools {
namespace {

struct Row {
  std::string precision;
  train::EpochMetrics last;
  double seconds_per_epoch = 0;
  std::size_t peak_bytes = 0;
  std::int64_t skipped = 0;
  double delta_pp = 0;
  bool ok = true;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

void add_parity_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "parity",
      "Train the same model with the same seed under several precisions and compare test "
      "accuracy, macro-F1, time, memory and skipped steps against the first one");
  auto options = std::make_shared<TrainOptions>(cmd, /*with_run_flags=*/false);
  auto precisions = std::make_shared<std::string>("fp32,bf16,fp16");
  auto tolerance = std::make_shared<double>(0.5);
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--precisions", *precisions,
                  "Comma-separated precision modes; the first is the reference")
      ->capture_default_str();
  cmd->add_option("--tolerance", *tolerance,
                  "Largest accepted accuracy drop below the reference, in percentage points")
      ->capture_default_str();
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->footer("Exit status: 0 if every precision is within the tolerance, 1 otherwise.\n"
              "Example: mixprec parity --model cnn --epochs 3 --precisions fp32,bf16,fp16");
  cmd->callback([options, precisions, tolerance, json] {
    const std::vector<std::string> modes = split_list(*precisions);
    MIXPREC_CHECK(modes.size() >= 2, ValueError, "parity",
                  "--precisions needs at least two modes, e.g. fp32,bf16; got '" << *precisions << "'");
    MIXPREC_CHECK(std::isfinite(*tolerance) && *tolerance >= 0, ValueError, "parity",
                  "--tolerance must be >= 0 percentage points, got " << *tolerance);
    for (const std::string& m : modes) amp::parse_precision_mode(m);  // fail before training
    std::vector<Row> rows;
    train::TrainConfig base = options->resolve();
    MIXPREC_CHECK(base.task != "regression", ValueError, "parity",
                  "parity compares test accuracy; a --task regression run has none (train it in each "
                  "precision and compare the logs' test_r2)");
    for (const std::string& mode : modes) {
      train::TrainConfig config = base;
      config.precision = mode;
      train::Trainer trainer(config);
      if (!*json) {
        trainer.on_epoch = [&](const train::EpochMetrics& m) {
          std::printf("[%s] epoch %d/%d  loss %.4f  test acc %.4f  %.1f s\n", mode.c_str(), m.epoch,
                      config.epochs, m.train_loss, m.test_accuracy, m.train_seconds);
          std::fflush(stdout);
        };
      }
      const std::vector<train::EpochMetrics> history = trainer.run();
      Row r;
      r.precision = trainer.resolved_precision();
      r.last = history.back();
      for (const train::EpochMetrics& m : history) {
        r.seconds_per_epoch += m.train_seconds / static_cast<double>(history.size());
        r.peak_bytes = std::max(r.peak_bytes, m.memory.total_peak);
        r.skipped += m.skipped_steps;
      }
      rows.push_back(r);
    }
    bool all_ok = true;
    for (Row& r : rows) {
      r.delta_pp = 100.0 * (r.last.test_accuracy - rows[0].last.test_accuracy);
      r.ok = r.delta_pp >= -*tolerance;
      all_ok = all_ok && r.ok;
    }
    if (*json) {
      nlohmann::json j{{"model", base.model}, {"epochs", base.epochs}, {"seed", base.seed},
                       {"reference", rows[0].precision}, {"tolerance_pp", *tolerance},
                       {"pass", all_ok}};
      for (const Row& r : rows) {
        j["results"].push_back({{"precision", r.precision}, {"test_accuracy", r.last.test_accuracy},
                                {"macro_f1", r.last.macro_f1}, {"seconds_per_epoch", r.seconds_per_epoch},
                                {"peak_bytes", r.peak_bytes}, {"skipped_steps", r.skipped},
                                {"delta_pp", r.delta_pp}, {"within_tolerance", r.ok}});
      }
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("\nparity: model %s, %d epochs, seed %llu, reference %s, tolerance %.2f pp\n",
                  base.model.c_str(), base.epochs, static_cast<unsigned long long>(base.seed),
                  rows[0].precision.c_str(), *tolerance);
      std::printf("%-13s %9s %9s %8s %8s %12s %8s  %s\n", "precision", "test acc", "macro-F1",
                  "delta pp", "s/epoch", "peak memory", "skipped", "verdict");
      for (const Row& r : rows) {
        std::printf("%-13s %9.4f %9.4f %+8.2f %8.1f %12s %8lld  %s\n", r.precision.c_str(),
                    r.last.test_accuracy, r.last.macro_f1, r.delta_pp, r.seconds_per_epoch,
                    format_mib(r.peak_bytes).c_str(), static_cast<long long>(r.skipped),
                    &r == &rows[0] ? "reference" : (r.ok ? "ok" : "FAIL"));
      }
      std::printf("verdict: %s\n", all_ok ? "PASS (every precision within tolerance)"
                                          : "FAIL (see the rows marked FAIL)");
    }
    if (!all_ok) throw CLI::RuntimeError(1);
  });
}

}  // namespace mixprec::tools
