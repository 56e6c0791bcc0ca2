#pragma once
/// Task: what turns a model's output on a batch into a training loss, and a whole evaluation
/// pass into metrics. The Trainer runs any Module on any BatchSource through one of these.
///  - ClassificationTask: logits [B, C] against one class per sample: cross-entropy; accuracy,
///    macro-F1 and a confusion matrix.
///  - LanguageModelTask: logits [B, T, V] against the B*T next tokens: mean cross-entropy per
///    token; perplexity exp(loss) and bits per byte loss / ln 2 (tokens are bytes).
///  - RegressionTask: outputs [B, 1] against one real value per sample (Batch::values, in
///    standardised units): mean squared error; MSE and R² in the target's own units.
#include <cstdint>
#include <memory>
#include <string>

#include "mixprec/tensor/tensor.h"
#include "mixprec/data/batch_source.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/metrics.h"

namespace mixprec::train {

struct EpochMetrics;

/// Accumulates one evaluation pass, batch by batch.
class Evaluation {
 public:
  virtual ~Evaluation() = default;
  /// Adds the model's output on one batch (any float dtype; reduced in f64).
  virtual void add(const Tensor& output, const data::Batch& batch) = 0;
  /// Writes the mean loss (EpochMetrics::test_loss) and the task's metric fields into m.
  virtual void write(EpochMetrics& m) const = 0;
  /// The confusion matrix of a classification pass; nullptr for other tasks.
  virtual const ConfusionMatrix* confusion() const { return nullptr; }
};

class Task {
 public:
  virtual ~Task() = default;
  virtual models::TaskKind kind() const = 0;
  /// The scalar training loss (with its autograd graph) of `output` on `batch`. ShapeError if
  /// the output does not fit the batch's targets.
  virtual Tensor loss(const Tensor& output, const data::Batch& batch) const = 0;
  /// loss() in a training step, given the gradient the step's backward will bring it
  /// (TrainStep::loss_gradient()): a task whose loss can compute its gradient in the forward
  /// (cross-entropy) uses it; the default ignores it. The same value as loss().
  virtual Tensor training_loss(const Tensor& output, const data::Batch& batch,
                               const Tensor& loss_gradient) const {
    (void)loss_gradient;
    return loss(output, batch);
  }
  /// A fresh, empty evaluation.
  virtual std::unique_ptr<Evaluation> evaluation() const = 0;
};

class ClassificationTask : public Task {
 public:
  /// ValueError unless num_classes >= 2.
  explicit ClassificationTask(std::int64_t num_classes);
  models::TaskKind kind() const override { return models::TaskKind::classification; }
  Tensor loss(const Tensor& logits, const data::Batch& batch) const override;
  Tensor training_loss(const Tensor& logits, const data::Batch& batch,
                       const Tensor& loss_gradient) const override;
  std::unique_ptr<Evaluation> evaluation() const override;

 private:
  std::int64_t classes_;
};

class LanguageModelTask : public Task {
 public:
  /// ValueError unless vocab_size >= 2.
  explicit LanguageModelTask(std::int64_t vocab_size);
  models::TaskKind kind() const override { return models::TaskKind::language_model; }
  Tensor loss(const Tensor& logits, const data::Batch& batch) const override;
  Tensor training_loss(const Tensor& logits, const data::Batch& batch,
                       const Tensor& loss_gradient) const override;
  std::unique_ptr<Evaluation> evaluation() const override;

 private:
  std::int64_t vocab_;
};

class RegressionTask : public Task {
 public:
  /// The batches' values are (y - target_mean) / target_stddev (data::TabularSchema), so the
  /// loss is well scaled whatever the target's units; evaluation maps outputs back with them to
  /// report MSE and R² in the target's units. ValueError unless target_stddev > 0 and finite.
  RegressionTask(float target_mean, float target_stddev);
  models::TaskKind kind() const override { return models::TaskKind::regression; }
  Tensor loss(const Tensor& output, const data::Batch& batch) const override;
  std::unique_ptr<Evaluation> evaluation() const override;

 private:
  float mean_, stddev_;
};

/// The task of a registered model (its TaskKind with its classes or vocabulary).
std::shared_ptr<Task> make_task(const models::ModelSpec& spec);

}  // namespace mixprec::train
