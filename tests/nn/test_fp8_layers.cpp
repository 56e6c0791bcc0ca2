// The fp8 layer policy (nn::Fp8Layers): every Linear but the first and the last, by path; a
// model with fewer than three Linears refused in one line; inside an Fp8Scope the chosen layers
// run fp8_linear with their own state and the others stay plain; outside it every layer is
// plain; the state tensors are named for a checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/memory.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/gpt.h"
#include "mixprec/nn/layers.h"
#include "mixprec/ops/fp8_linear.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"

namespace mixprec::nn {
namespace {

std::shared_ptr<Sequential> four_linears() {
  return sequential({std::make_shared<Linear>(8, 16, true, 1), std::make_shared<ReLU>(),
                     std::make_shared<Linear>(16, 16, true, 2), std::make_shared<Linear>(16, 16, true, 3),
                     std::make_shared<Linear>(16, 4, true, 4)});
}

TEST(Fp8Layers, EveryLinearButTheFirstAndTheLast) {
  auto model = four_linears();
  Fp8Layers layers(*model, runtime::Fp8Recipe{});
  EXPECT_EQ(layers.paths(), (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(layers.state_tensors().size(), 2u * 9u);
  EXPECT_EQ(layers.state_tensors().count("2.fp8_grad_history"), 1u);
  EXPECT_THROW(layers.state("0"), ValueError);
}

TEST(Fp8Layers, RefusesAModelWithoutAMiddleLinear) {
  auto model = sequential({std::make_shared<Linear>(4, 4), std::make_shared<Linear>(4, 4)});
  try {
    Fp8Layers layers(*model, runtime::Fp8Recipe{});
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 3"), std::string::npos) << e.what();
  }
}

TEST(Fp8Layers, TheScopeSwitchesOnlyTheChosenLayers) {
  auto model = four_linears();
  Fp8Layers layers(*model, runtime::Fp8Recipe{});
  const Tensor x = Tensor::randn({5, 16}, 9);
  auto* middle = dynamic_cast<Linear*>(model->children()[2].second.get());
  auto* first = dynamic_cast<Linear*>(model->children()[0].second.get());
  ASSERT_NE(middle, nullptr);
  const Tensor plain = (*middle)(x);
  Tensor in_scope, first_in_scope;
  {
    Fp8Scope scope(layers);
    in_scope = (*middle)(x);
    first_in_scope = (*first)(Tensor::randn({5, 8}, 10));
    EXPECT_EQ(active_fp8_state(*first), nullptr);
    EXPECT_EQ(active_fp8_state(*middle), &layers.state("2"));
  }
  EXPECT_EQ(active_fp8_state(*middle), nullptr);
  // The same call through fp8_linear with a fresh state of the same recipe: the same bits.
  Fp8LinearState fresh(runtime::Fp8Recipe{});
  EXPECT_EQ(in_scope.to_vector(), fp8_linear(x, middle->weight(), middle->bias(), fresh).to_vector());
  EXPECT_NE(in_scope.to_vector(), plain.to_vector());  // E4M3 rounding shows
  EXPECT_EQ(first_in_scope.to_vector(),
            linear(Tensor::randn({5, 8}, 10), first->weight(), first->bias()).to_vector());
  EXPECT_EQ((*middle)(x).to_vector(), plain.to_vector());  // outside the scope: plain again
  EXPECT_FALSE(layers.take_found_inf());
}

// Overrides (a layer policy's fp8 entries): false pins a default layer out of fp8 (no state, the
// plain forward in the scope), true puts the first or last Linear in; a path that is not a
// Linear is refused naming it and listing the Linears; a policy leaving no fp8 layer is refused.
TEST(Fp8Layers, OverridesPinLayersOutOfOrIntoFp8) {
  auto model = four_linears();
  Fp8Layers pinned(*model, runtime::Fp8Recipe{}, {{"2", false}});
  EXPECT_EQ(pinned.paths(), (std::vector<std::string>{"3"}));
  EXPECT_EQ(pinned.state_tensors().count("2.fp8_input_scale"), 0u);
  auto* middle = dynamic_cast<Linear*>(model->children()[2].second.get());
  const Tensor x = Tensor::randn({5, 16}, 9);
  const Tensor plain = (*middle)(x);
  {
    Fp8Scope scope(pinned);
    EXPECT_EQ(active_fp8_state(*middle), nullptr);
    EXPECT_EQ((*middle)(x).to_vector(), plain.to_vector());
  }
  Fp8Layers edges(*model, runtime::Fp8Recipe{}, {{"0", true}, {"4", true}, {"3", false}});
  EXPECT_EQ(edges.paths(), (std::vector<std::string>{"0", "2", "4"}));
  try {
    Fp8Layers bad(*model, runtime::Fp8Recipe{}, {{"1", false}}, "policy file 'p.json'");
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("policy file 'p.json' names layer '1'"), std::string::npos) << what;
    EXPECT_NE(what.find("its Linears: 0, 2, 3, 4"), std::string::npos) << what;
  }
  EXPECT_THROW(Fp8Layers(*model, runtime::Fp8Recipe{}, {{"2", false}, {"3", false}}), ValueError);
  // Two Linears: refused by default, accepted when the policy puts one in.
  auto two = sequential({std::make_shared<Linear>(4, 4), std::make_shared<Linear>(4, 4)});
  EXPECT_EQ(Fp8Layers(*two, runtime::Fp8Recipe{}, {{"1", true}}).paths(), (std::vector<std::string>{"1"}));
}

// q, k and v are one Linear (qkv_proj) with one fp8 scale: a policy written for the older
// separate projections is refused naming the fused layer, since it may set them apart.
TEST(Fp8Layers, APolicyNamingAnOlderQProjectionIsRefusedNamingTheFusedLayer) {
  GPT gpt(GptConfig{.vocab_size = 16, .context = 8, .d_model = 8, .n_heads = 2, .n_layers = 2});
  for (const char* old : {"blocks.1.attn.q_proj", "blocks.0.attn.v_proj"}) {
    try {
      Fp8Layers bad(gpt, runtime::Fp8Recipe{}, {{old, true}}, "policy file 'p.json'");
      ADD_FAILURE() << "accepted " << old;
    } catch (const ValueError& e) {
      const std::string what = e.what(), layer = std::string(old);
      const std::string fused = layer.substr(0, layer.size() - 6) + "qkv_proj";
      EXPECT_NE(what.find("names layer '" + layer + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("'" + fused + "'"), std::string::npos) << what;
    }
  }
  const Fp8Layers fused(gpt, runtime::Fp8Recipe{}, {{"blocks.1.attn.qkv_proj", true}, {"blocks.0.fc", false}});
  EXPECT_EQ(fused.state_tensors().count("blocks.1.attn.qkv_proj.fp8_weight_scale"), 1u);
  EXPECT_EQ(fused.state_tensors().count("blocks.0.fc.fp8_weight_scale"), 0u);
}

// report(): per layer the three roles with their amax, history max and scale; the fractions
// only after an observed step; set_observe(false) stops the counting.
TEST(Fp8Layers, ReportsAmaxScaleAndObservedFractionsPerRole) {
  auto model = four_linears();
  Fp8Layers layers(*model, runtime::Fp8Recipe{});
  auto* middle = dynamic_cast<Linear*>(model->children()[2].second.get());
  const Tensor x = Tensor::randn({5, 16}, 9, DType::f32, 0.0f, 1000.0f);  // beyond 448 at scale 1
  std::vector<Fp8LayerReport> r = layers.report();
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].roles.size(), 3u);
  EXPECT_EQ(r[0].path, "2");
  EXPECT_EQ(r[0].roles[0].role, "input");
  EXPECT_EQ(r[0].roles[2].role, "grad");
  EXPECT_FALSE(r[0].roles[0].observed);
  layers.set_observe(true);
  {
    Fp8Scope scope(layers);
    sum((*middle)(x)).backward();
  }
  layers.set_observe(false);
  r = layers.report();
  const Fp8RoleReport& in = r[0].roles[0];
  EXPECT_TRUE(in.observed);
  EXPECT_GT(in.saturated, 0.0);  // delayed scaling's first cast ran at scale 1
  EXPECT_LE(in.saturated, 1.0);
  const float amax = max_abs(x).item();
  EXPECT_EQ(in.amax, amax);
  EXPECT_EQ(in.history_amax, amax);
  EXPECT_EQ(in.scale, std::exp2(std::floor(std::log2(448.0 / amax))));  // margin 0
  EXPECT_TRUE(r[0].roles[2].observed);
  EXPECT_FALSE(r[1].roles[0].observed);  // layer "3" did not run
}

// The memory rule: a training step in fp8 peaks no higher than the same step in bf16.
// An fp8 Linear saves 1-byte copies of its input and weight where a bf16 one saves its 16-bit
// input and a 16-bit weight copy; that holds only if the input's own 16-bit tensor is not kept
// anyway (GELU's node once saved its output as well as its input), and if neither the forward's
// bias nor the backward's dx and bias gradient go through f32 copies of activations. Tokens
// outnumber features here, as in a transformer, so activations dominate the weights.
TEST(Fp8Layers, ATrainingStepPeaksNoHigherThanInBf16) {
  auto model = sequential({std::make_shared<Linear>(64, 64, true, 1), std::make_shared<GELU>(),
                           std::make_shared<Linear>(64, 256, true, 2), std::make_shared<GELU>(),
                           std::make_shared<Linear>(256, 64, true, 3), std::make_shared<GELU>(),
                           std::make_shared<Linear>(64, 64, true, 4)});
  Fp8Layers layers(*model, runtime::Fp8Recipe{});
  const Tensor x = Tensor::randn({2048, 64}, 11);
  const auto step_peak = [&](bool fp8) {
    for (const Tensor& p : model->parameters()) p.set_grad(Tensor());
    reset_peak_memory();
    const std::size_t before = memory_stats().total_current;
    {
      runtime::Autocast region(true, DType::bf16);
      std::unique_ptr<Fp8Scope> scope = fp8 ? std::make_unique<Fp8Scope>(layers) : nullptr;
      sum((*model)(x).to(DType::f32)).backward();
    }
    return memory_stats().total_peak - before;
  };
  step_peak(false);  // a first step of each warms the caches (autocast, the fp8 states)
  step_peak(true);
  const std::size_t bf16 = step_peak(false), fp8 = step_peak(true);
  EXPECT_LE(fp8, bf16) << "fp8 step peak " << fp8 << " bytes, bf16 " << bf16;
  EXPECT_GT(bf16, std::size_t{2048} * 256 * 2) << "the bf16 step should hold its activations";
}

}  // namespace
}  // namespace mixprec::nn
