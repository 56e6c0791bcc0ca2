// A training checkpoint of the older model layout (MultiHeadAttention's separate q_proj, k_proj
// and v_proj) resumes onto the fused qkv_proj and continues bit for bit as the run that never
// stopped: weights, fp32 masters, Adam's moments, the per-parameter step counts (indexed in
// the older parameter order), the fp8 layers' scaling state and the precision autopilot's layer
// state all map onto the one layer. The older checkpoint is made here from a checkpoint of
// today's layout by splitting every fused entry the way the older version wrote it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "mixprec/train/trainer.h"
#include "train/trainer_test_util.h"

namespace mixprec::train {
namespace {

namespace fs = std::filesystem;
using io::test::TempDir;
using nlohmann::json;

constexpr const char* kParts[] = {"q_proj", "k_proj", "v_proj"};

std::string write_text(const fs::path& dir) {
  const fs::path p = dir / "corpus.txt";
  std::ofstream out(p);
  for (int i = 0; i < 60; ++i) out << "the quick brown fox jumps over the lazy dog. pack my box. ";
  return p.string();
}

TrainConfig tiny_gpt(const std::string& text, const std::string& precision) {
  TrainConfig c;
  c.model = "gpt-mini";
  c.data = "text:" + text;
  c.context = 16;
  c.layers = 2;  // fp8's default policy then runs blocks.1.attn.qkv_proj in fp8
  c.heads = 2;
  c.width = 16;
  c.batch_size = 4;
  c.limit_train = 24;
  c.limit_test = 8;
  c.epochs = 2;
  c.lr = 3e-3f;
  c.scheduler = "none";
  c.precision = precision;
  c.seed = 5;
  c.progress = false;
  return c;
}

/// "<x>.qkv_proj<rest>" -> {"<x>.", "<rest>"}; nullopt-like empty pair for other names.
std::pair<std::string, std::string> split_fused(const std::string& name) {
  const std::size_t at = name.find(".qkv_proj");
  if (at == std::string::npos) return {};
  return {name.substr(0, at + 1), name.substr(at + 9)};
}

/// Each fused entry as three: rows [0, d), [d, 2d), [2d, 3d) under q_proj, k_proj, v_proj.
std::string split_safetensors(const std::string& bytes) {
  io::SafetensorsFile f = io::decode_safetensors(bytes, "test");
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : f.tensors) {
    const auto [head, rest] = split_fused(name);
    if (head.empty()) {
      out.emplace_back(name, t);
      continue;
    }
    const std::int64_t d = t.size(0) / 3;
    for (std::int64_t p = 0; p < 3; ++p) {
      out.emplace_back(head + kParts[p] + rest, t.slice(0, p * d, (p + 1) * d).contiguous());
    }
  }
  return io::encode_safetensors(out, f.metadata);
}

/// Each fused layer's fp8 state as the older layers' (blocks.1's three in fp8): the true amax
/// and scale in one part, a smaller amax and a larger scale in the others, so only max and
/// min give the state back. blocks.0's first Linear (its q_proj) was not in fp8 under the older
/// default policy, so its k_proj and v_proj state is written and q_proj's is not.
std::string split_fp8(const std::string& bytes) {
  io::SafetensorsFile f = io::decode_safetensors(bytes, "test");
  std::vector<std::pair<std::string, Tensor>> out;
  bool any_fused = false;
  for (const auto& [name, t] : f.tensors) {
    const auto [head, rest] = split_fused(name);
    if (head.empty()) {
      out.emplace_back(name, t);
      continue;
    }
    any_fused = true;
    const bool scale = rest.ends_with("_scale");
    for (std::int64_t p = 0; p < 3; ++p) {
      const Tensor v = p == 1 ? t : mul(t, Tensor::full(t.shape(), scale ? 2.0f : 0.5f));
      out.emplace_back(head + kParts[p] + rest, v);
    }
  }
  EXPECT_TRUE(any_fused) << "no fp8 state of a fused layer: the test would prove nothing";
  for (const char* part : {"k_proj", "v_proj"}) {
    out.emplace_back(std::string("blocks.0.attn.") + part + ".fp8_input_amax", Tensor::full({1}, 3.0f));
  }
  return io::encode_safetensors(out, f.metadata);
}

/// The parameter paths in the older order: a fused layer's weight and bias become q_proj's,
/// then k_proj's, then v_proj's.
std::vector<std::string> older_order(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    const auto [head, rest] = split_fused(p);
    if (head.empty()) {
      out.push_back(p);
    } else if (rest == ".weight") {
      for (const char* part : kParts) {
        out.push_back(head + part + ".weight");
        out.push_back(head + part + ".bias");
      }
    }
  }
  return out;
}

/// state.json with the optimizer's "param.<i>.<name>" scalars indexed in the older order, and
/// the autopilot's fused layers as the three older ones (FLOPs split f/2, f/4, f/4: exact).
std::string split_state(const std::string& text, const std::vector<std::string>& paths) {
  json state = json::parse(text);
  const std::vector<std::string> older = older_order(paths);
  json scalars = json::object();
  for (const auto& [key, value] : state.at("optimizer").at("scalars").items()) {
    if (!key.starts_with("param.")) {
      scalars[key] = value;
      continue;
    }
    const std::size_t dot = key.find('.', 6);
    const std::string& p = paths[std::stoul(key.substr(6, dot - 6))];
    const std::string name = key.substr(dot + 1);
    const auto [head, rest] = split_fused(p);
    for (std::size_t i = 0; i < older.size(); ++i) {
      bool mine = older[i] == p;
      for (const char* part : kParts) mine = mine || (!head.empty() && older[i] == head + part + rest);
      if (mine) scalars["param." + std::to_string(i) + "." + name] = value;
    }
  }
  EXPECT_GT(scalars.size(), state.at("optimizer").at("scalars").size());
  state["optimizer"]["scalars"] = scalars;
  if (state.contains("autopilot")) {
    json layers = json::array();
    for (const json& l : state.at("autopilot").at("layers")) {
      const auto [head, rest] = split_fused(l.at("path").get<std::string>() + ".");
      if (head.empty()) {
        layers.push_back(l);
        continue;
      }
      const double f = l.at("flops").get<double>();
      for (int p = 0; p < 3; ++p) {
        json part = l;
        part["path"] = head + kParts[p];
        part["flops"] = p == 0 ? f / 2 : f / 4;
        layers.push_back(part);
      }
    }
    state["autopilot"]["layers"] = layers;
  }
  return state.dump(1);
}

class OlderQkvCheckpoint : public ::testing::TestWithParam<const char*> {};

TEST_P(OlderQkvCheckpoint, ResumesBitIdenticallyOntoTheFusedProjection) {
  TempDir dir;
  const std::string text = write_text(dir.path());
  TrainConfig c = tiny_gpt(text, GetParam());
  c.max_steps = 9;
  Trainer straight(c);
  const std::vector<EpochMetrics> a = straight.run();

  TrainConfig first = c;
  first.max_steps = 4;
  first.checkpoint_dir = (dir.path() / "ckpt").string();
  Trainer(first).run();
  io::CheckpointFiles files = io::load_checkpoint(first.checkpoint_dir);
  std::vector<std::string> paths;
  for (const auto& [p, t] : straight.model().named_parameters()) paths.push_back(p);
  files.files["model.safetensors"] = split_safetensors(files.files.at("model.safetensors"));
  files.files["optimizer.safetensors"] = split_safetensors(files.files.at("optimizer.safetensors"));
  files.files["state.json"] = split_state(files.files.at("state.json"), paths);
  if (files.files.count("fp8.safetensors") != 0) {
    files.files["fp8.safetensors"] = split_fp8(files.files.at("fp8.safetensors"));
  }
  const std::string older_dir = (dir.path() / "older").string();
  io::save_checkpoint(older_dir, "epoch-0000-step-00000004", files);
  ASSERT_NE(files.files.at("model.safetensors").find("blocks.1.attn.q_proj.weight"), std::string::npos);
  ASSERT_EQ(files.files.at("model.safetensors").find("qkv_proj"), std::string::npos);
  ASSERT_NE(files.files.at("optimizer.safetensors").find("blocks.0.attn.v_proj.bias.exp_avg_sq"),
            std::string::npos);

  TrainConfig second = c;
  second.resume = older_dir;
  Trainer resumed(second);
  const std::vector<EpochMetrics> b = resumed.run();
  test::expect_same_run(straight, a, resumed, b);
}

INSTANTIATE_TEST_SUITE_P(Precisions, OlderQkvCheckpoint,
                         ::testing::Values("fp32", "bf16", "fp8-delayed", "auto-layer"),
                         [](const auto& p) {
                           std::string n = p.param;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

TEST(OlderQkvCheckpoint, StepCountsThatDifferAcrossTheMergedPartsAreRefused) {
  TempDir dir;
  TrainConfig c = tiny_gpt(write_text(dir.path()), "fp32");
  c.max_steps = 2;
  c.checkpoint_dir = (dir.path() / "ckpt").string();
  Trainer trainer(c);
  trainer.run();
  io::CheckpointFiles files = io::load_checkpoint(c.checkpoint_dir);
  std::vector<std::string> paths;
  for (const auto& [p, t] : trainer.model().named_parameters()) paths.push_back(p);
  files.files["model.safetensors"] = split_safetensors(files.files.at("model.safetensors"));
  files.files["optimizer.safetensors"] = split_safetensors(files.files.at("optimizer.safetensors"));
  json state = json::parse(split_state(files.files.at("state.json"), paths));
  // The older order's k_proj.weight of block 0: stepped once less than its q_proj.
  const std::vector<std::string> older = older_order(paths);
  const auto k = std::find(older.begin(), older.end(), "blocks.0.attn.k_proj.weight") - older.begin();
  state["optimizer"]["scalars"]["param." + std::to_string(k) + ".step"] = 1.0;
  files.files["state.json"] = state.dump();
  const std::string older_dir = (dir.path() / "older").string();
  io::save_checkpoint(older_dir, "epoch-0000-step-00000002", files);
  TrainConfig again = c;
  again.resume = older_dir;
  again.max_steps = 4;
  try {
    Trainer{again};
    ADD_FAILURE() << "resumed a checkpoint whose merged parameters were stepped apart";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.attn.qkv_proj.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::train
