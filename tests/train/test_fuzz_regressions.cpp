// Inputs that made the fuzzers (fuzz/, docs/fuzzing.md) hit undefined behaviour, fed through the
// same public entry points: each must now be refused with a ValueError. nlohmann's get<int>()
// on a JSON number written with an exponent (1e300) casts the double to the integer type, which
// is undefined when it does not fit; the readers now take integers only, range-checked.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/io/sha256.h"
#include "mixprec/train/precision_autopilot.h"
#include "mixprec/train/trainer.h"

namespace mixprec::train {
namespace {

using io::test::TempDir;

// A checkpoint holding only state.json, with a manifest giving its true size and SHA-256 (what
// fuzz/fuzz_train_state.cpp builds around each input).
void write_state_checkpoint(const TempDir& dir, const std::string& state) {
  std::ofstream(dir / "state.json", std::ios::binary) << state;
  std::ofstream(dir / "MANIFEST.json", std::ios::binary)
      << R"({"format": "mixprec.checkpoint", "version": 1, "created": "2026-01-01T00:00:00Z", )"
      << R"("files": {"state.json": {"sha256": ")" << io::sha256_hex(state)
      << R"(", "bytes": )" << state.size() << "}}}";
}

// The smallest state.json that reaches the config reader: its integer fields filled in.
std::string state_with_config(const std::string& config_fields) {
  return R"({"format": "mixprec.training_state", "version": 1, "epoch": 1, "precision_resolved": "bf16",)"
         R"( "history": [], "config": {"model": "mlp", "precision": "bf16", "batch_size": 128, "lr": 0.001,)"
         R"( "optimizer": "adam", "weight_decay": 0, "clip": 0, "accum": 1, "scheduler": "", "seed": 0,)"
         R"( "threads": 0, "limit_train": -1, "limit_test": -1, "data_dir": "", "log_path": "",)"
         R"( "checkpoint_dir": "", "keep_checkpoints": 0, )" +
         config_fields + "}}";
}

TEST(FuzzRegression, TrainStateConfigIntegerWithExponentIsRefused) {
  TempDir dir;
  write_state_checkpoint(dir, state_with_config(R"("epochs": 1e300)"));
  EXPECT_THROW(checkpoint_config(dir.path().string()), ValueError);
}

TEST(FuzzRegression, TrainStateOptionalConfigIntegerWithExponentIsRefused) {
  TempDir dir;
  write_state_checkpoint(dir, state_with_config(R"("epochs": 1, "context": -1e19)"));
  EXPECT_THROW(checkpoint_config(dir.path().string()), ValueError);
}

TEST(FuzzRegression, TrainStateConfigIntegerBeyondIntIsRefused) {
  TempDir dir;
  write_state_checkpoint(dir, state_with_config(R"("epochs": 4294967297)"));
  EXPECT_THROW(checkpoint_config(dir.path().string()), ValueError);
}

TEST(FuzzRegression, TrainStateEpochWithExponentIsRefused) {
  TempDir dir;
  std::string state = state_with_config(R"("epochs": 1)");
  state.replace(state.find(R"("epoch": 1)"), 10, R"("epoch": 9e99)");
  write_state_checkpoint(dir, state);
  EXPECT_THROW(checkpoint_config(dir.path().string()), ValueError);
}

TEST(FuzzRegression, ValidStateStillReads) {
  TempDir dir;
  write_state_checkpoint(dir, state_with_config(R"("epochs": 3, "context": 64)"));
  const TrainConfig c = checkpoint_config(dir.path().string());
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(c.context, 64);
}

TEST(FuzzRegression, LayerPolicyMoveStepWithExponentIsRefused) {
  const std::string text =
      R"({"format": "mixprec-layer-policy", "version": 1, "model": "mlp", "compute": "bf16",)"
      R"( "layers": {"layers.0": "bf16"}, "moves": [{"step": 1e300, "layer": "layers.0",)"
      R"( "from": "bf16", "to": "fp32"}]})";
  EXPECT_THROW(LayerPolicy::parse(text, "fuzz.json"), ValueError);
}

TEST(FuzzRegression, LayerPolicyVersionWithExponentIsRefused) {
  EXPECT_THROW(LayerPolicy::parse(R"({"format": "mixprec-layer-policy", "version": 1e300, "layers": {}})", "fuzz.json"),
               ValueError);
}

// Found by fuzz_layer_policy in CI: a "format" (or "version") of another JSON type threw
// nlohmann's type_error instead of a ValueError.
TEST(FuzzRegression, LayerPolicyFormatOfAnotherTypeIsRefused) {
  EXPECT_THROW(LayerPolicy::parse(R"({"format": {"co": 1}, "version": 1, "layers": {}})", "fuzz.json"), ValueError);
  EXPECT_THROW(LayerPolicy::parse(R"({"format": ["mixprec-layer-policy"], "version": 1, "layers": {}})", "fuzz.json"),
               ValueError);
  EXPECT_THROW(LayerPolicy::parse(R"({"format": "mixprec-layer-policy", "version": "1", "layers": {}})", "fuzz.json"),
               ValueError);
  EXPECT_THROW(LayerPolicy::parse(R"({"format": "mixprec-layer-policy", "version": 1, "model": {}, "layers": {}})",
                                  "fuzz.json"),
               ValueError);
}

}  // namespace
}  // namespace mixprec::train
