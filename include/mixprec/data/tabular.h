#pragma once
/// A table (CSV) made ready for training: the training and held-out rows (a second file, or a
/// seeded split of the first), every feature standardised with the statistics of the training
/// rows only, and the schema that records how, so that evaluation and prediction read new rows
/// exactly the way the model saw its training rows.
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/data/idx.h"

namespace mixprec::data {

/// How a model trained on a table reads rows: what a checkpoint stores next to the weights.
struct TabularSchema {
  std::vector<std::string> features;  ///< feature column names, in model-input order
  /// Per feature, over the training rows only (population stddev; 0 = constant column, whose
  /// standardised value is always 0).
  std::vector<float> mean, stddev;
  std::string target;                 ///< the target column's name
  bool regression = false;            ///< real-valued target (else class ids)
  std::int64_t num_classes = 0;       ///< classification: K, the largest training label + 1
  /// Regression: the training targets' mean and stddev; the model is trained on standardised
  /// targets (y - target_mean) / target_stddev and its outputs are mapped back with them.
  float target_mean = 0, target_stddev = 1;
};

/// What to read.
struct TabularOptions {
  std::string train_path;
  std::string test_path;     ///< "" = hold out val_fraction of train_path's rows instead
  std::string target;        ///< target column name; "" = the last column
  bool regression = false;   ///< the target is a real value (else a class id 0..K-1)
  double val_fraction = 0.2; ///< in (0, 1): share of the rows held out when test_path is ""
  std::uint64_t seed = 0;    ///< chooses the held-out rows
};

/// The training and held-out rows of a table, standardised with the training rows' statistics.
struct TabularData {
  Dataset train, test;
  TabularSchema schema;
};

/// The rows d holds out for validation: the m = round(fraction * N) rows (clamped to [1, N - 1])
/// with the smallest keys splitmix64(splitmix64(seed) ^ i) (ties by index), in ascending order.
/// A pure function of (seed, N, fraction) that a few lines of Python replay. ValueError unless
/// N >= 2 and fraction is in (0, 1).
std::vector<std::int64_t> held_out_rows(std::int64_t n, double fraction, std::uint64_t seed);

/// Reads, checks, splits and standardises. ValueError naming the file (and line and column
/// where it applies) for every read_csv error, and for: a classification target with fewer
/// than two distinct classes or a class id above 65535, a test file with a class the training
/// rows lack, a constant regression target, a training file with one row and no test file.
TabularData load_tabular(const TabularOptions& opts);

/// Maps the rows of a table to model inputs under a stored schema: the schema's feature
/// columns by name (any others, the target included, are ignored), standardised with its
/// statistics. images [N, F] f32. ValueError naming the file and the first missing column.
Dataset read_tabular_inputs(const std::string& path, const TabularSchema& schema);

}  // namespace mixprec::data
