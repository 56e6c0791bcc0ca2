// The Trainer's --loss-scaling and --scaler-growth-interval: validation, what a checkpoint
// records (and what an older checkpoint without them means), refusal to resume under another
// scaling, and an fp16 run with predictive scaling that trains with power-of-two scales.
// (Bit-identical resumption of a predictive run: TrainResume "fp16+predictive" in test_trainer.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "mixprec/core/error.h"
#include "io/io_test_util.h"
#include "mixprec/train/trainer.h"
#include "train/trainer_test_util.h"
#include "train/config_json.h"

using namespace mixprec;
namespace fs = std::filesystem;
using io::test::TempDir;

namespace {


train::TrainConfig tiny(const std::string& loss_scaling) {
  train::TrainConfig c;
  c.model = "mlp";
  c.precision = "fp16";
  c.loss_scaling = loss_scaling;
  c.epochs = 1;
  c.batch_size = 64;
  c.limit_train = 1024;
  c.limit_test = 300;
  c.seed = 5;
  c.progress = false;
  return c;
}

bool is_power_of_two(double x) {
  int e = 0;
  return x > 0 && std::frexp(x, &e) == 0.5;
}

TEST(TrainLossScaling, BadValuesAreRejected) {
  train::TrainConfig c = tiny("adaptive");
  try {
    c.validate();
    FAIL() << "accepted an unknown loss scaling";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic or predictive"), std::string::npos) << e.what();
  }
  c = tiny("predictive");
  c.scaler_growth_interval = 0;
  EXPECT_THROW(c.validate(), ValueError);
  c.scaler_growth_interval = -5;
  EXPECT_THROW(c.validate(), ValueError);
  c.scaler_growth_interval = 1;
  EXPECT_NO_THROW(c.validate());
  EXPECT_NO_THROW(tiny("dynamic").validate());
}

TEST(TrainLossScaling, ConfigJsonRoundTripAndOldCheckpointDefaults) {
  train::TrainConfig c = tiny("predictive");
  c.scaler_growth_interval = 50;
  nlohmann::json j = train::detail::config_to_json(c);
  const train::TrainConfig back = train::detail::config_from_json(j, "test");
  EXPECT_EQ(back.loss_scaling, "predictive");
  EXPECT_EQ(back.scaler_growth_interval, 50);
  // A checkpoint written before these flags existed ran the dynamic scaler's defaults.
  j.erase("loss_scaling");
  j.erase("scaler_growth_interval");
  const train::TrainConfig old = train::detail::config_from_json(j, "test");
  EXPECT_EQ(old.loss_scaling, "dynamic");
  EXPECT_EQ(old.scaler_growth_interval, 2000);
  // Both shape the computation: resuming under other values is refused, naming the field.
  using train::detail::first_incompatibility;
  EXPECT_NE(first_incompatibility(old, back).find("loss_scaling"), std::string::npos);
  train::TrainConfig other_interval = back;
  other_interval.scaler_growth_interval = 2000;
  EXPECT_NE(first_incompatibility(back, other_interval).find("scaler_growth_interval"),
            std::string::npos);
  EXPECT_EQ(first_incompatibility(back, back), "");
}

TEST(TrainLossScaling, PredictiveFp16RunTrainsAndItsCheckpointRemembersTheMode) {
  TempDir dir;
  train::TrainConfig c = tiny("predictive");
  c.checkpoint_dir = dir.path().string();
  const std::vector<train::EpochMetrics> history = train::Trainer(c).run();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_GT(history[0].test_accuracy, 0.6);
  EXPECT_TRUE(std::isfinite(history[0].train_loss));
  // Every predicted scale is a power of two; the initial 2^16 was replaced by a prediction.
  EXPECT_TRUE(is_power_of_two(history[0].loss_scale)) << history[0].loss_scale;
  EXPECT_NE(history[0].loss_scale, 65536.0);

  const train::TrainConfig saved = train::checkpoint_config(dir.path().string());
  EXPECT_EQ(saved.loss_scaling, "predictive");
  EXPECT_EQ(saved.scaler_growth_interval, 2000);

  train::TrainConfig resumed = c;
  resumed.checkpoint_dir.clear();
  resumed.resume = dir.path().string();
  resumed.epochs = 2;
  resumed.loss_scaling = "dynamic";
  try {
    train::Trainer t(resumed);
    FAIL() << "resumed a predictive run with dynamic scaling";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("loss_scaling"), std::string::npos) << e.what();
  }
  resumed.loss_scaling = "predictive";
  EXPECT_EQ(train::Trainer(resumed).next_epoch(), 2);
}

}  // namespace
