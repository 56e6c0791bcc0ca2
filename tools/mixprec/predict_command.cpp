// `mixprec predict`: one prediction per row of a CSV file, from a checkpoint trained on a table.
#include <cstdio>

#include "commands.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/train/predict.h"

namespace mixprec::tools {

void add_predict_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Predict every row of a CSV file with a model trained by `mixprec train --data csv:PATH`: "
      "the class and its probabilities (classification) or the value (regression), as CSV");
  struct Args {
    std::string checkpoint, input, output;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--checkpoint", a->checkpoint,
                  "A checkpoint directory, or a directory of checkpoints (the newest complete one "
                  "is used)")
      ->required();
  cmd->add_option("--input", a->input,
                  "CSV file with a header holding the training features by name (in any order; "
                  "other columns, the target included, are ignored)")
      ->required();
  cmd->add_option("--output", a->output,
                  "Write the predictions here (atomically: the file appears complete or not at all); "
                  "default: standard output");
  cmd->footer(
      "Output: a header, then one line per input row:\n"
      "  classification: prediction,prob_0,...,prob_{K-1}   (class id, then its probabilities)\n"
      "  regression:     prediction                         (in the target's units)\n"
      "Example:\n"
      "  mixprec predict --checkpoint iris --input new_flowers.csv --output predicted.csv");
  cmd->callback([a] {
    const std::string text = train::predictions_csv(train::predict_checkpoint(a->checkpoint, a->input));
    if (a->output.empty()) {
      std::fputs(text.c_str(), stdout);
    } else {
      io::write_file_atomically(a->output, text);
    }
  });
}

}  // namespace mixprec::tools
