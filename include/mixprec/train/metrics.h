#pragma once
/// Classification metrics from a confusion matrix: accuracy, per-class precision/recall/F1 and
/// macro-F1 (the unweighted mean of the per-class F1 scores, as scikit-learn's f1_score(average=
/// "macro"); a class that is never predicted nor present scores 0 and still counts).
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::train {

class ConfusionMatrix {
 public:
  /// An all-zero num_classes x num_classes matrix; ValueError unless num_classes >= 2.
  explicit ConfusionMatrix(std::int64_t num_classes);
  /// Counts one prediction; ValueError if a class is out of range.
  void add(std::int64_t truth, std::int64_t predicted);
  /// Adds argmax(logits[i]) against targets[i] for each row of logits [N, C] (any float dtype;
  /// ties go to the lower class; a NaN row counts as a wrong prediction, class -1 -> never right).
  void add_logits(const Tensor& logits, const std::vector<std::int64_t>& targets);
  /// Count of samples of class `truth` predicted as `predicted`.
  std::int64_t at(std::int64_t truth, std::int64_t predicted) const;
  std::int64_t num_classes() const { return n_; }
  std::int64_t total() const { return total_; }
  /// Samples whose logits contained NaN (counted wrong).
  std::int64_t nan_rows() const { return nan_rows_; }

  double accuracy() const;
  double precision(std::int64_t c) const;
  double recall(std::int64_t c) const;
  double f1(std::int64_t c) const;
  double macro_f1() const;
  /// A text table: one row per class (name, precision, recall, F1, support) plus totals.
  std::string per_class_table(const std::vector<std::string>& class_names = {}) const;

 private:
  std::int64_t n_;
  std::vector<std::int64_t> counts_;  // row = truth, column = prediction
  std::int64_t total_ = 0;
  std::int64_t nan_rows_ = 0;
};

/// The ten Fashion-MNIST class names ("T-shirt/top", "Trouser", ...).
const std::vector<std::string>& fashion_mnist_classes();

}  // namespace mixprec::train
