#pragma once
/// Tabular data from a CSV file: numeric feature columns and one target column (an integer
/// class id, a real value, or none at all for rows to predict on), validated with errors that
/// name the file, line and column, and optionally standardised per column (z-scores) with
/// statistics that can be reused on a test file.
///
/// Format: one sample per line ("\n" or "\r\n"), cells separated by a single delimiter
/// character, surrounding spaces ignored, blank lines skipped. Quoting is not interpreted
/// (header names may be wrapped in double quotes, but no cell may contain the delimiter).
/// Every error is a ValueError whose message starts "read_csv:" and names the file.
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/data/idx.h"

namespace mixprec::data {

/// Most columns a CSV file may have. A header line longer than this is refused after counting
/// its delimiters, before any per-column storage is allocated.
inline constexpr std::int64_t kCsvMaxColumns = 1'000'000;

/// What the target column holds.
enum class CsvTarget {
  class_id,  ///< an integer >= 0 per row -> Dataset::labels (classification)
  value,     ///< a finite real number per row -> Dataset::values (regression)
  none,      ///< no target is read (rows to predict on); label_column, if present, is ignored
};

/// How to read a CSV file.
struct CsvOptions {
  /// Name of the target column (needs has_header), or "" for the last column.
  std::string label_column;
  /// What the target column holds.
  CsvTarget target = CsvTarget::class_id;
  /// If not empty: exactly these columns, by header name and in this order, are the features
  /// (the columns a model was trained on); any other column is ignored. ValueError naming the
  /// first one the header lacks.
  std::vector<std::string> feature_columns;
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
  /// the target column (or those of feature_columns, in its order); labels: the target
  /// column's class ids (CsvTarget::class_id), or values: its numbers (CsvTarget::value).
  Dataset data;
  /// The F feature column names (from the header; "column <k>" with k 1-based without one).
  std::vector<std::string> feature_names;
  /// The target column's name ("column <k>" without a header; "" for CsvTarget::none).
  std::string target_name;
  /// Per-feature mean and population standard deviation (divisor N) of the values in this
  /// file, computed whether or not standardize was set; stddev is 0 for a constant column.
  std::vector<float> mean, stddev;
};

/// Reads path. Every feature cell must parse as a finite number that fits in f32 ("nan",
/// "inf" and empty cells are rejected, not guessed at); every label cell must be an integer
/// >= 0 (e.g. "3" or "3.0"). With opts.standardize, data.images holds exactly what
/// standardize_with(raw, mean, stddev) gives. ValueError naming the file (and the line and
/// column where it applies) if the file is missing, empty, has no data rows, fewer than two
/// columns (one without a target), more than kCsvMaxColumns, ragged rows, a non-numeric / NaN /
/// Inf / out-of-range cell, a missing or ambiguous label column or feature column, or a
/// negative or non-integer label (a non-numeric or non-finite value for CsvTarget::value).
CsvDataset read_csv(const std::string& path, const CsvOptions& opts = {});

/// Per-column mean and population standard deviation (divisor N, computed in double) of
/// d.images [N, F] f32 contiguous, N >= 1; a column whose values are all equal gets its exact
/// value as mean and stddev 0. What read_csv reports, and what a training split's statistics
/// are computed with.
void column_statistics(const Dataset& d, std::vector<float>& mean, std::vector<float>& stddev);

/// x[i, j] = (x[i, j] - mean[j]) / stddev[j] in place (computed in double, rounded once),
/// or 0 where stddev[j] == 0: a column that was constant in the training data carries no
/// information the model could have learned, so a test value there must not inject one.
/// d.images: [N, F] f32 contiguous; ValueError unless mean and stddev both have F entries,
/// every mean is finite and every stddev finite and >= 0.
void standardize_with(Dataset& d, const std::vector<float>& mean, const std::vector<float>& stddev);

}  // namespace mixprec::data
