#pragma once
// The training flags shared by `mixprec train` and `mixprec parity`, and how flags given on the
// command line override a resumed checkpoint's configuration.
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "mixprec/train/trainer.h"

namespace mixprec::tools {

/// Flags bound to a TrainConfig, remembering which were given explicitly.
class TrainOptions {
 public:
  /// Adds the flags to cmd. with_run_flags: also --precision, --log, --checkpoint-dir, --resume,
  /// --keep-checkpoints (train only; parity picks precisions itself and keeps no files).
  TrainOptions(CLI::App* cmd, bool with_run_flags);
  /// The configuration: defaults, or the checkpoint's when --resume is given, overridden by every
  /// flag given on the command line.
  train::TrainConfig resolve() const;

 private:
  void bind(CLI::Option* opt, std::function<void(train::TrainConfig&, const train::TrainConfig&)> copy);

  bool no_progress_ = false;
  CLI::Option* precision_ = nullptr;  // --precision and --policy (train only)
  CLI::Option* policy_ = nullptr;
  CLI::Option* val_fraction_ = nullptr;
  std::shared_ptr<train::TrainConfig> given_ = std::make_shared<train::TrainConfig>();
  std::vector<std::pair<CLI::Option*, std::function<void(train::TrainConfig&, const train::TrainConfig&)>>>
      bound_;
};

/// "12.3 MiB".
std::string format_mib(std::size_t bytes);

}  // namespace mixprec::tools
