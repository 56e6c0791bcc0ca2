#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/core/error.h"
#include "mixprec/train/metrics.h"

using namespace mixprec;
using train::ConfusionMatrix;

TEST(TrainMetrics, MatchesHandComputedScores) {
  // truth:     0 0 0 1 1 2
  // predicted: 0 0 1 1 2 2
  ConfusionMatrix cm(3);
  const int truth[] = {0, 0, 0, 1, 1, 2}, pred[] = {0, 0, 1, 1, 2, 2};
  for (int i = 0; i < 6; ++i) cm.add(truth[i], pred[i]);
  EXPECT_DOUBLE_EQ(cm.accuracy(), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(cm.precision(0), 1.0);
  EXPECT_DOUBLE_EQ(cm.recall(0), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(cm.precision(1), 0.5);
  EXPECT_DOUBLE_EQ(cm.recall(1), 0.5);
  EXPECT_DOUBLE_EQ(cm.precision(2), 0.5);
  EXPECT_DOUBLE_EQ(cm.recall(2), 1.0);
  // F1 per class: 0.8, 0.5, 2/3; macro-F1 is their unweighted mean.
  EXPECT_NEAR(cm.f1(0), 0.8, 1e-15);
  EXPECT_NEAR(cm.macro_f1(), (0.8 + 0.5 + 2.0 / 3.0) / 3.0, 1e-15);
}

TEST(TrainMetrics, AbsentClassCountsAsZeroF1) {
  ConfusionMatrix cm(3);
  cm.add(0, 0);
  cm.add(1, 1);
  EXPECT_DOUBLE_EQ(cm.f1(2), 0.0);
  EXPECT_DOUBLE_EQ(cm.macro_f1(), 2.0 / 3.0);
}

TEST(TrainMetrics, LogitsArgmaxTiesAndNaN) {
  ConfusionMatrix cm(3);
  const Tensor logits = Tensor::from_vector({1, 5, 5,          // tie: lower class (1) wins
                                             0, 0, 9,          // class 2
                                             NAN, 9, 0},       // NaN row: wrong whatever it says
                                            {3, 3});
  cm.add_logits(logits, {1, 2, 1});
  EXPECT_EQ(cm.at(1, 1), 1);
  EXPECT_EQ(cm.at(2, 2), 1);
  EXPECT_EQ(cm.nan_rows(), 1);
  EXPECT_DOUBLE_EQ(cm.accuracy(), 2.0 / 3.0);
  EXPECT_THROW(cm.add_logits(logits, {0, 1}), ShapeError);
  EXPECT_THROW(cm.add(3, 0), ValueError);
  EXPECT_THROW(ConfusionMatrix(1), ValueError);
}

TEST(TrainMetrics, PerClassTableNamesClasses) {
  ConfusionMatrix cm(10);
  cm.add(0, 0);
  const std::string table = cm.per_class_table(train::fashion_mnist_classes());
  EXPECT_NE(table.find("T-shirt/top"), std::string::npos);
  EXPECT_NE(table.find("Ankle boot"), std::string::npos);
  EXPECT_NE(table.find("macro avg"), std::string::npos);
}
