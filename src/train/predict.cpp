#include "mixprec/train/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mixprec/core/transfer.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/data/tabular.h"
#include "mixprec/train/checkpoint_model.h"

namespace mixprec::train {
namespace {

// Rows per forward pass: bounds the activation memory whatever the file's length.
constexpr std::int64_t kBatch = 1024;

}  // namespace

Predictions predict_checkpoint(const std::string& checkpoint, const std::string& input_csv) {
  const CheckpointModel m = load_checkpoint_model(checkpoint);
  MIXPREC_CHECK(m.tabular.has_value(), ValueError, "predict",
                "checkpoint '" << m.path << "' was trained on --data '" << m.config.data
                               << "', not on a table; predict reads CSV rows for models trained with "
                                  "--data csv:PATH");
  const data::TabularSchema& schema = *m.tabular;
  const data::Dataset d = data::read_tabular_inputs(input_csv, schema);
  Predictions p;
  p.task = schema.regression ? models::TaskKind::regression : models::TaskKind::classification;
  p.target = schema.target;
  p.rows = d.images.size(0);
  const std::int64_t f = d.images.size(1);
  const std::int64_t outputs = schema.regression ? 1 : m.config.outputs;
  p.classes = schema.regression ? 0 : outputs;

  const std::vector<float> x = d.images.to_vector();
  runtime::NoGradGuard no_grad;
  runtime::Autocast region(m.autocast, m.compute);
  for (std::int64_t begin = 0; begin < p.rows; begin += kBatch) {
    const std::int64_t n = std::min(kBatch, p.rows - begin);
    const Tensor in = Tensor::from_vector(
        std::vector<float>(x.begin() + begin * f, x.begin() + (begin + n) * f), {n, f});
    const TransferReason why("predictions");
    const std::vector<float> out = (*m.model)(in).to(DType::f32).to_vector();
    MIXPREC_CHECK(static_cast<std::int64_t>(out.size()) == n * outputs, ValueError, "predict",
                  "checkpoint '" << m.path << "': the model gives " << out.size() / static_cast<std::size_t>(n)
                                 << " outputs per row, its schema expects " << outputs);
    for (std::int64_t i = 0; i < n; ++i) {
      const float* row = out.data() + i * outputs;
      if (schema.regression) {
        p.values.push_back(static_cast<double>(schema.target_mean) +
                           static_cast<double>(schema.target_stddev) * static_cast<double>(row[0]));
        continue;
      }
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < outputs; ++c) {
        if (row[c] > row[best]) best = c;
      }
      p.predicted.push_back(best);
      // Softmax with the maximum subtracted, in double: exact enough that probabilities sum to 1.
      double sum = 0;
      std::vector<double> e(static_cast<std::size_t>(outputs));
      for (std::int64_t c = 0; c < outputs; ++c) {
        e[static_cast<std::size_t>(c)] = std::exp(static_cast<double>(row[c]) - static_cast<double>(row[best]));
        sum += e[static_cast<std::size_t>(c)];
      }
      for (const double v : e) p.probabilities.push_back(v / sum);
    }
  }
  return p;
}

std::string predictions_csv(const Predictions& p) {
  std::string out = "prediction";
  for (std::int64_t c = 0; c < p.classes; ++c) out += ",prob_" + std::to_string(c);
  out += "\n";
  char buf[32];
  for (std::int64_t r = 0; r < p.rows; ++r) {
    if (p.task == models::TaskKind::regression) {
      std::snprintf(buf, sizeof buf, "%.9g", p.values[static_cast<std::size_t>(r)]);
      out += buf;
    } else {
      out += std::to_string(p.predicted[static_cast<std::size_t>(r)]);
      for (std::int64_t c = 0; c < p.classes; ++c) {
        std::snprintf(buf, sizeof buf, ",%.9g", p.probabilities[static_cast<std::size_t>(r * p.classes + c)]);
        out += buf;
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace mixprec::train
