#include "mixprec/train/metrics.h"

#include <cmath>
#include <cstdio>

#include "mixprec/core/transfer.h"
#include "mixprec/core/error.h"

namespace mixprec::train {

ConfusionMatrix::ConfusionMatrix(std::int64_t num_classes) : n_(num_classes) {
  MIXPREC_CHECK(num_classes >= 2, ValueError, "ConfusionMatrix",
                "needs at least 2 classes, got " << num_classes);
  counts_.assign(static_cast<std::size_t>(n_ * n_), 0);
}

void ConfusionMatrix::add(std::int64_t truth, std::int64_t predicted) {
  MIXPREC_CHECK(truth >= 0 && truth < n_ && predicted >= 0 && predicted < n_, ValueError,
                "ConfusionMatrix", "class out of range [0, " << n_ << "): truth " << truth
                                                             << ", predicted " << predicted);
  ++counts_[static_cast<std::size_t>(truth * n_ + predicted)];
  ++total_;
}

void ConfusionMatrix::add_logits(const Tensor& logits, const std::vector<std::int64_t>& targets) {
  MIXPREC_CHECK(logits.dim() == 2 && logits.size(1) == n_ &&
                    logits.size(0) == static_cast<std::int64_t>(targets.size()),
                ShapeError, "ConfusionMatrix",
                "logits must be [N, " << n_ << "] with N = " << targets.size() << " targets, got "
                                      << to_string(logits.shape()));
  const TransferReason why("evaluation outputs");
  const std::vector<float> v = logits.to_vector();
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const float* row = v.data() + static_cast<std::int64_t>(i) * n_;
    std::int64_t best = 0;
    bool nan = false;
    for (std::int64_t c = 0; c < n_; ++c) {
      nan = nan || std::isnan(row[c]);
      if (row[c] > row[best]) best = c;
    }
    if (nan) {
      // A NaN row is a wrong answer: file it under a class other than the truth.
      ++nan_rows_;
      best = (targets[i] + 1) % n_;
    }
    add(targets[i], best);
  }
}

std::int64_t ConfusionMatrix::at(std::int64_t truth, std::int64_t predicted) const {
  return counts_[static_cast<std::size_t>(truth * n_ + predicted)];
}

double ConfusionMatrix::accuracy() const {
  std::int64_t right = 0;
  for (std::int64_t c = 0; c < n_; ++c) right += at(c, c);
  return total_ == 0 ? 0.0 : static_cast<double>(right) / static_cast<double>(total_);
}

double ConfusionMatrix::precision(std::int64_t c) const {
  std::int64_t predicted = 0;
  for (std::int64_t t = 0; t < n_; ++t) predicted += at(t, c);
  return predicted == 0 ? 0.0 : static_cast<double>(at(c, c)) / static_cast<double>(predicted);
}

double ConfusionMatrix::recall(std::int64_t c) const {
  std::int64_t support = 0;
  for (std::int64_t p = 0; p < n_; ++p) support += at(c, p);
  return support == 0 ? 0.0 : static_cast<double>(at(c, c)) / static_cast<double>(support);
}

double ConfusionMatrix::f1(std::int64_t c) const {
  const double p = precision(c), r = recall(c);
  return p + r == 0.0 ? 0.0 : 2.0 * p * r / (p + r);
}

double ConfusionMatrix::macro_f1() const {
  double sum = 0.0;
  for (std::int64_t c = 0; c < n_; ++c) sum += f1(c);
  return sum / static_cast<double>(n_);
}

std::string ConfusionMatrix::per_class_table(const std::vector<std::string>& class_names) const {
  std::string out = "class          precision  recall     f1  support\n";
  char line[160];
  for (std::int64_t c = 0; c < n_; ++c) {
    std::int64_t support = 0;
    for (std::int64_t p = 0; p < n_; ++p) support += at(c, p);
    const std::string label = c < static_cast<std::int64_t>(class_names.size())
                                  ? class_names[static_cast<std::size_t>(c)]
                                  : std::to_string(c);
    std::snprintf(line, sizeof line, "%-14s %9.4f %7.4f %6.4f %8lld\n", label.c_str(),
                  precision(c), recall(c), f1(c), static_cast<long long>(support));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-14s %9s %7s %6.4f %8lld   (accuracy %.4f)\n", "macro avg", "",
                "", macro_f1(), static_cast<long long>(total_), accuracy());
  out += line;
  return out;
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names{"T-shirt/top", "Trouser", "Pullover", "Dress",
                                              "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                              "Bag",         "Ankle boot"};
  return names;
}

}  // namespace mixprec::train
