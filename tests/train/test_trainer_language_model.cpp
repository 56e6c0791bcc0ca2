// The Trainer on a language model: a small GPT trained on a text file through the registry
// (gpt-mini with small sizes), its log and metrics, a --max-steps stop inside an epoch and a
// resume from that stop that continues bit-identically, a user's own model and data through the
// second constructor, and the errors of bad text data and sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>

#include <nlohmann/json.hpp>

#include "mixprec/core/error.h"
#include "mixprec/data/text_corpus.h"
#include "mixprec/nn/gpt.h"
#include "io/io_test_util.h"
#include "mixprec/train/trainer.h"
#include "train/trainer_test_util.h"

using namespace mixprec;
namespace fs = std::filesystem;
using io::test::TempDir;

namespace {


// A few KB of repetitive English: a tiny model learns it quickly.
std::string write_text(const fs::path& dir) {
  const fs::path p = dir / "corpus.txt";
  std::ofstream out(p);
  for (int i = 0; i < 60; ++i) {
    out << "the quick brown fox jumps over the lazy dog. " << "pack my box with five dozen jugs. ";
  }
  return p.string();
}

train::TrainConfig tiny_gpt(const std::string& text) {
  train::TrainConfig c;
  c.model = "gpt-mini";
  c.data = "text:" + text;
  c.context = 16;
  c.layers = 1;
  c.heads = 2;
  c.width = 16;
  c.batch_size = 4;
  c.limit_train = 24;   // 6 batches per epoch
  c.limit_test = 8;     // 2 validation batches
  c.epochs = 2;
  c.lr = 3e-3f;
  c.scheduler = "none"; // a resume with a larger --max-steps keeps the same schedule
  c.precision = "fp32";
  c.seed = 5;
  c.progress = false;
  return c;
}

}  // namespace

TEST(TrainLanguageModel, TrainsLogsValidationLossAndBitsPerByte) {
  TempDir dir;
  train::TrainConfig c = tiny_gpt(write_text(dir.path()));
  c.log_path = (dir.path() / "run.jsonl").string();
  train::Trainer trainer(c);
  EXPECT_EQ(trainer.task().kind(), models::TaskKind::language_model);
  const std::vector<train::EpochMetrics> h = trainer.run();
  ASSERT_EQ(h.size(), 2u);
  for (const train::EpochMetrics& m : h) {
    EXPECT_TRUE(m.complete);
    EXPECT_EQ(m.epoch_batches, 6);
    EXPECT_EQ(m.train_samples, 24);
    EXPECT_NEAR(m.perplexity, std::exp(m.test_loss), 1e-9 * m.perplexity);
    EXPECT_NEAR(m.bits_per_byte, m.test_loss / std::numbers::ln2, 1e-12);
  }
  EXPECT_LT(h[1].test_loss, std::log(256.0));  // better than uniform over bytes: it learned
  std::ifstream log(c.log_path);
  std::string header, line;
  std::getline(log, header);
  EXPECT_EQ(nlohmann::json::parse(header).at("task"), "language-model");
  std::getline(log, line);
  const nlohmann::json e = nlohmann::json::parse(line);
  EXPECT_EQ(e.at("val_loss").get<double>(), h[0].test_loss);
  EXPECT_EQ(e.at("bits_per_byte").get<double>(), h[0].bits_per_byte);
  EXPECT_FALSE(e.contains("test_accuracy"));
}

TEST(TrainLanguageModel, MaxStepsStopsInsideAnEpochAndResumesBitIdentically) {
  TempDir dir;
  const std::string text = write_text(dir.path());
  train::TrainConfig c = tiny_gpt(text);
  c.max_steps = 9;  // epoch 1 (6 steps) and 3 steps of epoch 2
  train::Trainer straight(c);
  const std::vector<train::EpochMetrics> a = straight.run();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_TRUE(a[0].complete);
  EXPECT_FALSE(a[1].complete);
  EXPECT_EQ(a[1].epoch_batches, 3);
  EXPECT_EQ(a[1].optimizer_steps, 9);

  // Stop at step 4 (inside epoch 1), then resume to step 9.
  train::TrainConfig first = c;
  first.max_steps = 4;
  first.checkpoint_dir = (dir.path() / "ckpt").string();
  train::Trainer(first).run();
  ASSERT_TRUE(fs::exists(dir.path() / "ckpt" / "epoch-0000-step-00000004"));
  train::TrainConfig second = c;
  second.resume = first.checkpoint_dir;
  train::Trainer resumed(second);
  EXPECT_EQ(resumed.next_epoch(), 1);
  const std::vector<train::EpochMetrics> b = resumed.run();
  train::test::expect_same_run(straight, a, resumed, b);

  // A finished run says how to go on.
  train::TrainConfig again = c;
  again.resume = first.checkpoint_dir;
  again.max_steps = 4;
  try {
    train::Trainer{again};
    ADD_FAILURE() << "resumed past --max-steps";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-steps"), std::string::npos) << e.what();
  }
}

TEST(TrainLanguageModel, RefusesBadTextAndSizesNamingTheFlag) {
  TempDir dir;
  const auto expect_error = [](train::TrainConfig c, const std::string& fragment) {
    try {
      train::Trainer{c};
      ADD_FAILURE() << "accepted: expected an error about " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  const std::string text = write_text(dir.path());
  train::TrainConfig c = tiny_gpt(text);
  c.heads = 3;
  expect_error(c, "--heads 3 does not divide --width 16");
  c = tiny_gpt((dir.path() / "missing.txt").string());
  expect_error(c, "missing.txt");
  const fs::path small = dir.path() / "small.txt";
  std::ofstream(small) << "too short for a window";
  c = tiny_gpt(small.string());
  expect_error(c, "--context 16");
  c = tiny_gpt(text);
  c.model = "cnn";
  expect_error(c, "cannot train on --data text:");
  c = tiny_gpt(text);
  c.data = "fashion-mnist";
  expect_error(c, "is a language model");
  c = tiny_gpt(text);
  c.model = "transformer";
  expect_error(c, "unknown model 'transformer'");
}

TEST(TrainLanguageModel, TrainsAUsersModelAndDataThroughTheSecondConstructor) {
  TempDir dir;
  const data::TextCorpus corpus = data::load_text_corpus({write_text(dir.path())});
  data::TextSplit split = data::split_text(corpus, 0.2);
  data::TextWindowsOptions o;
  o.context = 8;
  o.batch_size = 4;
  o.seed = 1;
  o.batches_per_epoch = 5;
  auto train_data = std::make_shared<data::TextWindows>(split.train, o);
  o.random = false;
  o.batches_per_epoch = 0;
  o.max_batches = 2;
  auto eval_data = std::make_shared<data::TextWindows>(split.validation, o);
  nn::GptConfig g;
  g.context = 8;
  g.d_model = 16;
  g.n_heads = 2;
  g.n_layers = 1;
  auto model = std::make_shared<nn::GPT>(g);
  train::TrainConfig c;
  c.model = "my-gpt";  // a label: not in the registry
  c.precision = "bf16";
  c.scheduler = "none";
  c.progress = false;
  train::Trainer trainer(c, model, train_data, eval_data, std::make_shared<train::LanguageModelTask>(256));
  const std::vector<train::EpochMetrics> h = trainer.run();
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].epoch_batches, 5);
  EXPECT_GT(h[0].test_loss, 0);
  EXPECT_TRUE(std::isfinite(h[0].bits_per_byte));
  EXPECT_THROW(train::Trainer(c, nullptr, train_data, eval_data,
                              std::make_shared<train::LanguageModelTask>(256)),
               ValueError);
}
