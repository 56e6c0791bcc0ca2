// The Trainer end to end on a slice of Fashion-MNIST (Debian's dataset-fashion-mnist, which the
// project's install script provides): resumption is bit-identical in every precision mode,
// checkpoints from other runs are refused, bad configurations are rejected.
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "io/io_test_util.h"
#include "mixprec/train/trainer.h"
#include "train/trainer_test_util.h"
#include "train/config_json.h"

using namespace mixprec;
namespace fs = std::filesystem;
using io::test::TempDir;

namespace {


/// precision may carry a loss-scaling mode after a '+', e.g. "fp16+predictive".
train::TrainConfig small_config(const std::string& precision) {
  train::TrainConfig c;
  c.model = "mlp";
  const std::size_t plus = precision.find('+');
  c.precision = precision.substr(0, plus);
  if (plus != std::string::npos) c.loss_scaling = precision.substr(plus + 1);
  c.epochs = 2;
  c.batch_size = 64;
  c.accum = 2;
  c.clip = 1.0f;
  c.limit_train = 1024;
  c.limit_test = 300;
  c.seed = 3;
  c.progress = false;
  return c;
}

class TrainResume : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainResume, IsBitIdenticalToAnUninterruptedRun) {
  TempDir dir;
  train::TrainConfig c = small_config(GetParam());
  train::Trainer straight(c);
  const std::vector<train::EpochMetrics> a = straight.run();

  // The same run, interrupted right after its first checkpoint (the callback throws, as a crash
  // would stop it).
  struct Interrupted {};
  train::TrainConfig first = c;
  first.checkpoint_dir = dir.path().string();
  {
    train::Trainer interrupted(first);
    interrupted.on_epoch = [](const train::EpochMetrics&) { throw Interrupted{}; };
    EXPECT_THROW(interrupted.run(), Interrupted);
  }
  train::TrainConfig resumed = c;
  resumed.resume = dir.path().string();  // a directory: its newest complete checkpoint
  train::Trainer again(resumed);
  EXPECT_EQ(again.next_epoch(), 2);
  const std::vector<train::EpochMetrics> b = again.run();

  ASSERT_EQ(a.size(), 2u);
  train::test::expect_same_run(straight, a, again, b);
  EXPECT_GT(a[1].test_accuracy, 0.6);  // it did learn something
}

INSTANTIATE_TEST_SUITE_P(AllModes, TrainResume,
                         ::testing::Values("fp32", "bf16", "fp16", "fp16+predictive", "pure-bf16",
                                           "pure-bf16-sr"));

TEST(TrainTrainer, RefusesACheckpointOfAnotherRun) {
  TempDir dir;
  train::TrainConfig c = small_config("fp32");
  c.epochs = 1;
  c.checkpoint_dir = dir.path().string();
  train::Trainer(c).run();
  train::TrainConfig other = c;
  other.epochs = 2;
  other.checkpoint_dir.clear();
  other.resume = dir.path().string();
  other.model = "cnn";
  try {
    train::Trainer t(other);
    FAIL() << "resumed a checkpoint of another model";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("model"), std::string::npos) << e.what();
  }
  other.model = "mlp";
  other.precision = "fp16";
  EXPECT_THROW(train::Trainer{other}, ValueError);
  other.precision = "fp32";
  other.epochs = 1;  // already done
  EXPECT_THROW(train::Trainer{other}, ValueError);
  other.epochs = 2;
  train::Trainer ok(other);  // same run, more epochs: fine
  EXPECT_EQ(ok.next_epoch(), 2);
}

TEST(TrainTrainer, DataWorkersAreSavedValidatedAndDoNotBlockAResume) {
  train::TrainConfig c = small_config("fp32");
  c.data_workers = 3;
  nlohmann::json j = train::detail::config_to_json(c);
  EXPECT_EQ(train::detail::config_from_json(j, "test").data_workers, 3);
  j.erase("data_workers");  // a checkpoint from before the flag: the default
  const train::TrainConfig old = train::detail::config_from_json(j, "test");
  EXPECT_EQ(old.data_workers, -1);
  // The batches are the same bits with any worker count.
  EXPECT_EQ(train::detail::first_incompatibility(old, c), "");
  j["data_workers"] = std::int64_t{1} << 40;  // a hostile state file: refused, not truncated
  EXPECT_THROW(train::detail::config_from_json(j, "test").validate(), ValueError);
  c.data_workers = 257;
  EXPECT_THROW(c.validate(), ValueError);
}

TEST(TrainTrainer, SyncBatchnormIsSavedAndDoesNotBlockAResume) {
  train::TrainConfig c = small_config("fp32");
  c.sync_batchnorm = true;
  nlohmann::json j = train::detail::config_to_json(c);
  EXPECT_TRUE(train::detail::config_from_json(j, "test").sync_batchnorm);
  j.erase("sync_batchnorm");  // a checkpoint from before the flag: per-rank statistics
  const train::TrainConfig old = train::detail::config_from_json(j, "test");
  EXPECT_FALSE(old.sync_batchnorm);
  // Like the rank count, it only says how a data-parallel run computes BatchNorm statistics:
  // switching it on continues a one-process run with the same statistics on several ranks.
  EXPECT_EQ(train::detail::first_incompatibility(old, c), "");
  EXPECT_EQ(train::detail::first_incompatibility(c, old), "");
}

TEST(TrainTrainer, RejectsAbsurdConfigurations) {
  const auto expect_invalid = [](auto mutate) {
    train::TrainConfig c = small_config("fp32");
    mutate(c);
    EXPECT_THROW(c.validate(), ValueError);
  };
  expect_invalid([](train::TrainConfig& c) { c.batch_size = 0; });
  expect_invalid([](train::TrainConfig& c) { c.lr = -1e-3f; });
  expect_invalid([](train::TrainConfig& c) { c.lr = NAN; });
  expect_invalid([](train::TrainConfig& c) { c.epochs = 0; });
  expect_invalid([](train::TrainConfig& c) { c.model = ""; });
  expect_invalid([](train::TrainConfig& c) { c.max_steps = 0; });
  expect_invalid([](train::TrainConfig& c) { c.val_fraction = 1.0; });
  expect_invalid([](train::TrainConfig& c) { c.dropout = 1.0f; });
  expect_invalid([](train::TrainConfig& c) { c.width = -1; });
  expect_invalid([](train::TrainConfig& c) { c.precision = "fp9"; });
  expect_invalid([](train::TrainConfig& c) { c.optimizer = "lion"; });
  expect_invalid([](train::TrainConfig& c) { c.accum = 0; });
  expect_invalid([](train::TrainConfig& c) { c.clip = -1; });
  expect_invalid([](train::TrainConfig& c) { c.limit_train = 0; });
  expect_invalid([](train::TrainConfig& c) { c.scheduler = "warmup"; });
  expect_invalid([](train::TrainConfig& c) { c.checkpoint_every_steps = 10; });  // no checkpoint_dir
  expect_invalid([](train::TrainConfig& c) {
    c.checkpoint_dir = "ckpt";
    c.checkpoint_every_steps = -1;
  });
  EXPECT_NO_THROW(small_config("auto").validate());
}

TEST(TrainTrainer, MissingDatasetNamesThePackageAndTheFlag) {
  train::TrainConfig c = small_config("fp32");
  c.data_dir = "/nonexistent/fashion";
  try {
    train::Trainer t(c);
    FAIL() << "no error for a missing dataset";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--data-dir"), std::string::npos) << msg;
  }
}

TEST(TrainTrainer, EvaluateCheckpointReproducesTheRunsAccuracy) {
  TempDir dir;
  train::TrainConfig c = small_config("bf16");
  c.epochs = 1;
  c.checkpoint_dir = dir.path().string();
  const auto history = train::Trainer(c).run();
  const train::CheckpointEvaluation e = train::evaluate_checkpoint(dir.path().string());
  EXPECT_EQ(e.epoch, 1);
  EXPECT_EQ(e.config.model, "mlp");
  EXPECT_EQ(e.confusion.total(), 300);
  EXPECT_EQ(e.confusion.accuracy(), history.back().test_accuracy);
  EXPECT_EQ(e.confusion.macro_f1(), history.back().macro_f1);
}

// fp8 runs write, on the histogram steps, every fp8 layer's amax, history max, scale and the
// observed saturated/flushed fractions per role (the tags as plain bytes in the event file);
// the JSONL epoch line carries the same per layer and role in "fp8".
TEST(Trainer, Fp8RunWritesItsLayersToTensorBoard) {
  TempDir dir;
  train::TrainConfig c = small_config("fp8-delayed");
  c.epochs = 1;
  c.accum = 1;
  c.limit_train = 256;
  c.limit_test = 64;
  c.tensorboard = (dir.path() / "tb").string();
  c.histogram_every = 2;
  c.log_path = (dir.path() / "run.jsonl").string();
  train::Trainer trainer(c);
  const std::vector<train::EpochMetrics> history = trainer.run();
  ASSERT_FALSE(history.empty());
  EXPECT_FALSE(history.back().fp8.empty());
  const std::string log = io::read_file(c.log_path);
  const std::size_t last = log.rfind('\n', log.size() - 2);
  const nlohmann::json line = nlohmann::json::parse(log.substr(last + 1));
  ASSERT_TRUE(line.contains("fp8")) << line.dump();
  ASSERT_FALSE(line.at("fp8").empty());
  for (const auto& [layer, roles] : line.at("fp8").items()) {
    SCOPED_TRACE(layer);
    for (const char* role : {"input", "weight", "grad"}) {
      EXPECT_TRUE(roles.at(role).at("scale").is_number());
      EXPECT_TRUE(roles.at(role).at("amax").is_number());
      EXPECT_TRUE(roles.at(role).at("saturated").is_number());  // the epoch's first step counted
      EXPECT_TRUE(roles.at(role).at("flushed").is_number());
    }
  }
  std::string bytes;
  for (const auto& e : fs::directory_iterator(dir.path() / "tb")) bytes += io::read_file(e.path().string());
  EXPECT_NE(bytes.find("fp8/"), std::string::npos);
  for (const char* tag : {"/input/amax", "/input/amax_history", "/weight/scale", "/grad/scale",
                          "/input/saturated", "/weight/flushed", "/grad/flushed"}) {
    EXPECT_NE(bytes.find(tag), std::string::npos) << tag;
  }
}

}  // namespace
