#include "mixprec/train/task.h"

#include <cmath>
#include <numbers>

#include "mixprec/core/transfer.h"
#include "mixprec/core/error.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/runtime/node.h"
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
    const TransferReason why("evaluation loss");
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
    const TransferReason why("evaluation loss");
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

// outputs [B, 1] (or [B]) and the batch's B values as an f32 [B, 1] tensor of the same shape.
Tensor regression_target(const Tensor& output, const data::Batch& batch) {
  const auto b = static_cast<std::int64_t>(batch.values.size());
  MIXPREC_CHECK(output.defined() && output.numel() == b && output.dim() >= 1 && output.size(0) == b, ShapeError,
                "regression", "expects one output per sample ([" << b << ", 1]), got "
                                  << (output.defined() ? to_string(output.shape()) : "undefined")
                                  << " for a batch of " << b << " target values");
  return Tensor::from_vector(batch.values, output.shape());
}

// Sums in double in the target's units: squared errors for the MSE, and the targets' sum and
// sum of squares for the total variance R² divides by (R² = 1 - SSE / SST, as scikit-learn's
// r2_score, over the evaluation set's own mean).
class RegressionEvaluation : public Evaluation {
 public:
  RegressionEvaluation(float mean, float stddev) : mean_(mean), stddev_(stddev) {}
  void add(const Tensor& output, const data::Batch& batch) override {
    const Tensor target = regression_target(output, batch);
    const TransferReason why("evaluation outputs");
    const std::vector<float> out = output.to(DType::f32).to_vector();
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double standard_error = static_cast<double>(out[i]) - batch.values[i];
      const double y = mean_ + static_cast<double>(stddev_) * batch.values[i];
      const double error = static_cast<double>(stddev_) * standard_error;
      standard_sse_ += standard_error * standard_error;
      sse_ += error * error;
      sum_ += y;
      sum_sq_ += y * y;
    }
    count_ += static_cast<double>(out.size());
  }
  void write(EpochMetrics& m) const override {
    if (count_ == 0) return;
    m.test_loss = standard_sse_ / count_;
    m.mse = sse_ / count_;
    const double sst = sum_sq_ - sum_ * sum_ / count_;
    m.r2 = sst > 0 ? 1.0 - sse_ / sst : 0.0;
  }

 private:
  double mean_, stddev_;
  double standard_sse_ = 0, sse_ = 0, sum_ = 0, sum_sq_ = 0, count_ = 0;
};

}  // namespace

RegressionTask::RegressionTask(float target_mean, float target_stddev) : mean_(target_mean), stddev_(target_stddev) {
  MIXPREC_CHECK(std::isfinite(target_mean) && std::isfinite(target_stddev) && target_stddev > 0, ValueError,
                "RegressionTask", "needs a finite target mean and a finite stddev > 0, got " << target_mean
                                                                                           << " and " << target_stddev);
}

Tensor RegressionTask::loss(const Tensor& output, const data::Batch& batch) const {
  return mse_loss(output, regression_target(output, batch));
}

std::unique_ptr<Evaluation> RegressionTask::evaluation() const {
  return std::make_unique<RegressionEvaluation>(mean_, stddev_);
}

ClassificationTask::ClassificationTask(std::int64_t num_classes) : classes_(num_classes) {
  MIXPREC_CHECK(num_classes >= 2, ValueError, "ClassificationTask",
                "needs at least 2 classes, got " << num_classes);
}

Tensor ClassificationTask::loss(const Tensor& logits, const data::Batch& batch) const {
  return cross_entropy(logits, batch.targets);
}

namespace {

// The fused loss against the batch's targets: its device copy when it has one (no upload).
Tensor fused_loss(const Tensor& rows, const data::Batch& batch, const Tensor& loss_gradient) {
  if (batch.device_targets.defined() && runtime::needs_grad({&rows})) {
    return cross_entropy(rows, batch.device_targets, 0.0f, loss_gradient);
  }
  return cross_entropy(rows, batch.targets, 0.0f, loss_gradient);
}

}  // namespace

Tensor ClassificationTask::training_loss(const Tensor& logits, const data::Batch& batch,
                                         const Tensor& loss_gradient) const {
  return fused_loss(logits, batch, loss_gradient);
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

// The fused loss keeps the logits' gradient, not the logits: [B, T, V] dies with the caller's
// temporary, before backward (GPT-2-small: 0.8 GB of bf16 logits).
Tensor LanguageModelTask::training_loss(const Tensor& logits, const data::Batch& batch,
                                        const Tensor& loss_gradient) const {
  return fused_loss(token_rows(logits, batch, vocab_), batch, loss_gradient);
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
