#pragma once
/// Tabular classification data from a CSV file: numeric feature columns and one integer label
/// column, validated with errors that name the file, line and column, and optionally
/// standardised per column (z-scores) with statistics that can be reused on a test file.
///
/// Format: one sample per line ("\n" or "\r\n"), cells separated by a single delimiter
/// character, surrounding spaces ignored, blank lines skipped. Quoting is not interpreted
/// (header names may be wrapped in double quotes, but no cell may contain the delimiter).
/// Every error is a ValueError whose message starts "read_csv:" and names the file.
#include <string>
#include <vector>

#include "mixprec/data/idx.h"

namespace mixprec::data {

/// How to read a CSV file.
struct CsvOptions {
  /// Name of the label column (needs has_header), or "" for the last column.
  std::string label_column;
  /// Whether the first non-blank line holds the column names.
  bool has_header = true;
  /// The cell separator.
  char delimiter = ',';
  /// Whether to standardise each feature column to mean 0, std 1 with this file's statistics.
  bool standardize = true;
};

/// A data set read from a CSV file, with what is needed to treat a test file the same way.
struct CsvDataset {
  /// images [N, F] f32 (MemoryCategory::workspace): the feature columns in file order, minus
  /// the label column; labels: the label column's class ids.
  Dataset data;
  /// The F feature column names (from the header; "column <k>" with k 1-based without one).
  std::vector<std::string> feature_names;
  /// Per-feature mean and population standard deviation (divisor N) of the values in this
  /// file, computed whether or not standardize was set; stddev is 0 for a constant column.
  std::vector<float> mean, stddev;
};

/// Reads path. Every feature cell must parse as a finite number that fits in f32 ("nan",
/// "inf" and empty cells are rejected, not guessed at); every label cell must be an integer
/// >= 0 (e.g. "3" or "3.0"). With opts.standardize, data.images holds exactly what
/// standardize_with(raw, mean, stddev) gives. ValueError naming the file (and the line and
/// column where it applies) if the file is missing, empty, has no data rows, fewer than two
/// columns, ragged rows, a non-numeric / NaN / Inf / out-of-range cell, a missing or
/// ambiguous label column, or a negative or non-integer label.
CsvDataset read_csv(const std::string& path, const CsvOptions& opts = {});

/// x[i, j] = (x[i, j] - mean[j]) / stddev[j] in place (computed in double, rounded once),
/// or 0 where stddev[j] == 0: a column that was constant in the training data carries no
/// information the model could have learned, so a test value there must not inject one.
/// d.images: [N, F] f32 contiguous; ValueError unless mean and stddev both have F entries,
/// every mean is finite and every stddev finite and >= 0.
void standardize_with(Dataset& d, const std::vector<float>& mean, const std::vector<float>& stddev);

}  // namespace mixprec::data
