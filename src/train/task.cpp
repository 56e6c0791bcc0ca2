#include "mixprec/train/task.h"

#include <cmath>
#include <numbers>

#include "mixprec/core/error.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/trainer.h"

namespace mixprec::train {
namespace {

// logits [B, T, V] (or [N, V]) as [rows, V], the layout cross_entropy takes.
Tensor token_rows(const Tensor& logits, const data::Batch& batch, std::int64_t vocab) {
  MIXPREC_CHECK(logits.defined() && logits.dim() >= 2 && logits.size(-1) == vocab, ShapeError,
                "language model", "expects logits [B, T, " << vocab << "], got "
                                      << (logits.defined() ? to_string(logits.shape()) : "undefined"));
  const std::int64_t rows = logits.numel() / vocab;
  MIXPREC_CHECK(rows == static_cast<std::int64_t>(batch.targets.size()), ShapeError,
                "language model", "logits " << to_string(logits.shape()) << " predict " << rows
                                            << " tokens but the batch has " << batch.targets.size()
                                            << " targets");
  return logits.reshape({rows, vocab});
}

class ClassificationEvaluation : public Evaluation {
 public:
  explicit ClassificationEvaluation(std::int64_t classes) : confusion_(classes) {}
  void add(const Tensor& logits, const data::Batch& batch) override {
    const auto n = static_cast<double>(batch.targets.size());
    loss_sum_ += static_cast<double>(cross_entropy(logits, batch.targets).item()) * n;
    count_ += n;
    confusion_.add_logits(logits, batch.targets);
  }
  void write(EpochMetrics& m) const override {
    m.test_loss = count_ > 0 ? loss_sum_ / count_ : 0.0;
    m.test_accuracy = confusion_.accuracy();
    m.macro_f1 = confusion_.macro_f1();
  }
  const ConfusionMatrix* confusion() const override { return &confusion_; }

 private:
  ConfusionMatrix confusion_;
  double loss_sum_ = 0, count_ = 0;
};

class LanguageModelEvaluation : public Evaluation {
 public:
  explicit LanguageModelEvaluation(std::int64_t vocab) : vocab_(vocab) {}
  void add(const Tensor& logits, const data::Batch& batch) override {
    const auto n = static_cast<double>(batch.targets.size());
    loss_sum_ += static_cast<double>(cross_entropy(token_rows(logits, batch, vocab_), batch.targets).item()) * n;
    tokens_ += n;
  }
  void write(EpochMetrics& m) const override {
    m.test_loss = tokens_ > 0 ? loss_sum_ / tokens_ : 0.0;
    m.perplexity = std::exp(m.test_loss);
    m.bits_per_byte = m.test_loss / std::numbers::ln2;
  }

 private:
  std::int64_t vocab_;
  double loss_sum_ = 0, tokens_ = 0;
};

}  // namespace

ClassificationTask::ClassificationTask(std::int64_t num_classes) : classes_(num_classes) {
  MIXPREC_CHECK(num_classes >= 2, ValueError, "ClassificationTask",
                "needs at least 2 classes, got " << num_classes);
}

Tensor ClassificationTask::loss(const Tensor& logits, const data::Batch& batch) const {
  return cross_entropy(logits, batch.targets);
}

std::unique_ptr<Evaluation> ClassificationTask::evaluation() const {
  return std::make_unique<ClassificationEvaluation>(classes_);
}

LanguageModelTask::LanguageModelTask(std::int64_t vocab_size) : vocab_(vocab_size) {
  MIXPREC_CHECK(vocab_size >= 2, ValueError, "LanguageModelTask",
                "needs a vocabulary of at least 2 tokens, got " << vocab_size);
}

Tensor LanguageModelTask::loss(const Tensor& logits, const data::Batch& batch) const {
  return cross_entropy(token_rows(logits, batch, vocab_), batch.targets);
}

std::unique_ptr<Evaluation> LanguageModelTask::evaluation() const {
  return std::make_unique<LanguageModelEvaluation>(vocab_);
}

std::shared_ptr<Task> make_task(const models::ModelSpec& spec) {
  if (spec.task == models::TaskKind::language_model) {
    return std::make_shared<LanguageModelTask>(spec.num_classes);
  }
  return std::make_shared<ClassificationTask>(spec.num_classes);
}

}  // namespace mixprec::train
