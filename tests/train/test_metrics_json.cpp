// EpochMetrics through JSON (checkpoints, the log): a metric that was not finite is written as
// null (JSON has no NaN) and must read back, as NaN, instead of making the checkpoint unreadable.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "train/config_json.h"

namespace mixprec::train {
namespace {

TEST(MetricsJson, NonFiniteMetricsRoundTripAsNaN) {
  EpochMetrics m;
  m.epoch = 1;
  m.train_loss = 0.0;
  m.test_loss = std::numeric_limits<double>::quiet_NaN();  // every step skipped: no loss
  m.grad_norm_max = std::numeric_limits<double>::infinity();
  // Through text, as a checkpoint's state.json is written and read.
  const nlohmann::json j =
      nlohmann::json::parse(detail::metrics_to_json(m, models::TaskKind::classification).dump());
  EXPECT_TRUE(j.at("test_loss").is_null());
  const EpochMetrics back = detail::metrics_from_json(j, "test");
  EXPECT_TRUE(std::isnan(back.test_loss));
  EXPECT_TRUE(std::isnan(back.grad_norm_max));  // Inf is written as null too
  EXPECT_EQ(back.epoch, 1);
  // A wrong type is still an error naming the field.
  nlohmann::json bad = j;
  bad["test_loss"] = "high";
  EXPECT_THROW(detail::metrics_from_json(bad, "test"), ValueError);
}

}  // namespace
}  // namespace mixprec::train
