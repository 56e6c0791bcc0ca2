#pragma once
/// Predictions of a model trained on a table (`mixprec train --data csv:PATH`) for new rows:
/// what `mixprec predict` writes. The rows are read by column name and standardised with the
/// statistics stored in the checkpoint (those of the training rows), and the model runs under
/// its training precision's autocast, in eval mode.
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/models/zoo.h"

namespace mixprec::train {

struct Predictions {
  models::TaskKind task = models::TaskKind::classification;
  std::string target;               ///< the target column the model predicts
  std::int64_t rows = 0;
  std::int64_t classes = 0;         ///< classification: K; 0 for regression
  std::vector<std::int64_t> predicted;  ///< classification: argmax per row (ties: lower class)
  /// classification: rows x classes softmax probabilities (computed in double from the f32
  /// logits), row-major.
  std::vector<double> probabilities;
  std::vector<double> values;       ///< regression: one prediction per row, in the target's units
};

/// Loads the checkpoint (or the newest in a directory) and predicts every data row of the CSV
/// file input_csv (with a header; the features are found by name, any other column, the target
/// included, is ignored). ValueError naming the checkpoint if it was not trained on a table,
/// and the file, line and column for a bad input (a missing feature column, a non-numeric,
/// NaN or Inf cell, ragged rows).
Predictions predict_checkpoint(const std::string& checkpoint, const std::string& input_csv);

/// CSV text: a header, then one line per row. Classification "prediction,prob_0,...,prob_{K-1}"
/// (the class id and its probabilities); regression "prediction" (the value). Numbers are
/// printed with 9 significant digits.
std::string predictions_csv(const Predictions& p);

}  // namespace mixprec::train
