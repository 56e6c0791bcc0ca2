#pragma once
// Helpers for the Trainer and TrainStep tests: a model's parameter values, and that two runs (one
// straight, one stopped and resumed) agree bit for bit in every metric they log and every weight.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/train/trainer.h"

namespace mixprec::train::test {

/// Every parameter of m as f32 values, in parameters() order: two models compared bit for bit.
inline std::vector<std::vector<float>> parameter_values(nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.to(DType::f32).to_vector());
  return out;
}

// NaN-safe: a metric a task does not compute is NaN in both runs, and that counts as the same.
inline void expect_same_value(double a, double b, const char* name) {
  if (std::isnan(a) && std::isnan(b)) return;
  EXPECT_EQ(a, b) << name;
}

inline void expect_same_run(Trainer& a_trainer, const std::vector<EpochMetrics>& a, Trainer& b_trainer,
                            const std::vector<EpochMetrics>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t e = 0; e < a.size(); ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e + 1));
    expect_same_value(a[e].train_loss, b[e].train_loss, "train_loss");
    expect_same_value(a[e].test_loss, b[e].test_loss, "test_loss");
    expect_same_value(a[e].test_accuracy, b[e].test_accuracy, "test_accuracy");
    expect_same_value(a[e].macro_f1, b[e].macro_f1, "macro_f1");
    expect_same_value(a[e].grad_norm_mean, b[e].grad_norm_mean, "grad_norm_mean");
    expect_same_value(a[e].grad_norm_max, b[e].grad_norm_max, "grad_norm_max");
    expect_same_value(a[e].loss_scale, b[e].loss_scale, "loss_scale");
    expect_same_value(a[e].lr, b[e].lr, "lr");
    EXPECT_EQ(a[e].optimizer_steps, b[e].optimizer_steps);
    EXPECT_EQ(a[e].skipped_steps, b[e].skipped_steps);
    EXPECT_EQ(a[e].epoch_batches, b[e].epoch_batches);
    EXPECT_EQ(a[e].train_samples, b[e].train_samples);
    EXPECT_EQ(a[e].complete, b[e].complete);
  }
  const auto pa = a_trainer.model().named_parameters(), pb = b_trainer.model().named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first;
  }
}

}  // namespace mixprec::train::test
