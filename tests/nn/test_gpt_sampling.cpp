// Sampling from a GPT: the same seed gives the same tokens and different seeds different ones;
// greedy is the argmax of the logits and top_k = 1 is greedy; top-k keeps to the k most likely
// tokens; draws follow the softmax; long prompts are cropped to the context; the model's
// training flag, grad mode and the caller's autocast region survive; bad arguments are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/nn/gpt_sampling.h"

namespace mixprec::nn {
namespace {

GptConfig tiny(std::uint64_t seed = 3) {
  GptConfig c;
  c.vocab_size = 16;
  c.context = 8;
  c.d_model = 16;
  c.n_heads = 2;
  c.n_layers = 1;
  c.seed = seed;
  return c;
}

SamplingOptions options(std::int64_t tokens, float temperature, std::int64_t top_k = 0, std::uint64_t seed = 0) {
  SamplingOptions o;
  o.tokens = tokens;
  o.temperature = temperature;
  o.top_k = top_k;
  o.seed = seed;
  return o;
}

// The logits of the last position for a sequence, as sample() computes them (last context ids).
std::vector<float> last_logits(GPT& gpt, const std::vector<std::int64_t>& seq) {
  const auto t = std::min<std::int64_t>(static_cast<std::int64_t>(seq.size()), gpt.config().context);
  const std::vector<std::int64_t> window(seq.end() - t, seq.end());
  return gpt.logits(window, 1, t).slice(1, t - 1, t).to_vector();
}

void expect_value_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no exception thrown; expected a ValueError mentioning " << part;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

const std::vector<std::int64_t> kPrompt{1, 2, 3};

TEST(GptSampling, SameSeedSameTokensOtherSeedOtherTokens) {
  GPT gpt(tiny());
  gpt.train();
  const std::vector<std::int64_t> a = sample(gpt, kPrompt, options(16, 1.0f, 0, 7));
  EXPECT_TRUE(gpt.is_training()) << "the training flag is restored";
  EXPECT_TRUE(runtime::grad_enabled());
  ASSERT_EQ(a.size(), 16u);
  for (const std::int64_t id : a) EXPECT_TRUE(id >= 0 && id < 16) << id;
  EXPECT_EQ(sample(gpt, kPrompt, options(16, 1.0f, 0, 7)), a);
  EXPECT_NE(sample(gpt, kPrompt, options(16, 1.0f, 0, 8)), a);
  EXPECT_TRUE(sample(gpt, kPrompt, options(0, 1.0f)).empty());
  gpt.eval();
  (void)sample(gpt, kPrompt, options(1, 1.0f));
  EXPECT_FALSE(gpt.is_training());
}

TEST(GptSampling, GreedyIsArgmaxAndTopOneIsGreedy) {
  GPT gpt(tiny());
  const std::vector<std::int64_t> greedy = sample(gpt, kPrompt, options(10, 0.0f));
  std::vector<std::int64_t> seq = kPrompt;
  for (const std::int64_t id : greedy) {
    const std::vector<float> l = last_logits(gpt, seq);
    EXPECT_EQ(id, std::max_element(l.begin(), l.end()) - l.begin());
    seq.push_back(id);
  }
  for (const std::uint64_t seed : {0u, 1u, 2u}) {
    EXPECT_EQ(sample(gpt, kPrompt, options(10, 0.8f, 1, seed)), greedy) << "seed " << seed;
  }
}

TEST(GptSampling, TopKKeepsToTheKMostLikelyTokens) {
  GPT gpt(tiny());
  for (const std::uint64_t seed : {0u, 1u}) {
    const std::vector<std::int64_t> out = sample(gpt, kPrompt, options(6, 2.0f, 3, seed));
    std::vector<std::int64_t> seq = kPrompt;
    for (const std::int64_t id : out) {
      const std::vector<float> l = last_logits(gpt, seq);
      const auto above =
          std::count_if(l.begin(), l.end(), [&](float v) { return v > l[static_cast<std::size_t>(id)]; });
      EXPECT_LT(above, 3) << "token " << id << " is not among the 3 most likely";
      seq.push_back(id);
    }
  }
}

// One token from many seeds: the frequencies follow softmax(logits / T) (the most likely token
// has p ~ 0.42 here, so a uniform or mis-ordered draw fails).
TEST(GptSampling, DrawsFollowTheSoftmax) {
  GPT gpt(tiny());
  const float temperature = 0.05f;  // sharp: the untrained model's logits are close together
  const std::vector<float> l = last_logits(gpt, kPrompt);
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double total = 0.0;
  for (std::size_t j = 0; j < l.size(); ++j) total += p[j] = std::exp((l[j] - m) / temperature);
  constexpr int kDraws = 150;
  std::vector<int> count(l.size(), 0);
  for (int s = 0; s < kDraws; ++s)
    ++count[static_cast<std::size_t>(sample(gpt, kPrompt, options(1, temperature, 0, s))[0])];
  for (std::size_t j = 0; j < l.size(); ++j) {
    EXPECT_NEAR(count[j] / double{kDraws}, p[j] / total, 0.1) << "token " << j;
  }
}

TEST(GptSampling, LongPromptsAreCroppedToTheContext) {
  GPT gpt(tiny());
  std::vector<std::int64_t> long_prompt;
  for (int i = 0; i < 21; ++i) long_prompt.push_back((i * 5) % 16);
  const std::vector<std::int64_t> tail(long_prompt.end() - 8, long_prompt.end());
  for (const float temperature : {0.0f, 1.0f}) {
    const std::vector<std::int64_t> out = sample(gpt, long_prompt, options(12, temperature, 0, 4));
    EXPECT_EQ(out.size(), 12u);
    EXPECT_EQ(out, sample(gpt, tail, options(12, temperature, 0, 4)));
  }
}

TEST(GptSampling, RunsUnderTheCallersAutocastRegion) {
  GPT gpt(tiny());
  runtime::Autocast region;
  const std::vector<std::int64_t> greedy = sample(gpt, kPrompt, options(4, 0.0f));
  EXPECT_TRUE(runtime::autocast_enabled());
  std::vector<std::int64_t> seq = kPrompt;
  for (const std::int64_t id : greedy) {  // the bf16 logits' argmax
    const std::vector<float> l = last_logits(gpt, seq);
    EXPECT_EQ(id, std::max_element(l.begin(), l.end()) - l.begin());
    seq.push_back(id);
  }
}

TEST(GptSampling, BadArgumentsAreRefused) {
  GPT gpt(tiny());
  expect_value_error([&] { sample(gpt, {}, options(1, 1.0f)); }, "prompt is empty");
  expect_value_error([&] { sample(gpt, {1, -1}, options(1, 1.0f)); }, "prompt token 1 is -1");
  expect_value_error([&] { sample(gpt, {16}, options(1, 1.0f)); }, "[0, 16)");
  expect_value_error([&] { sample(gpt, kPrompt, options(-1, 1.0f)); }, "tokens must be >= 0");
  expect_value_error([&] { sample(gpt, kPrompt, options(1, -0.5f)); }, "temperature");
  expect_value_error([&] { sample(gpt, kPrompt, options(1, std::nanf(""))); }, "temperature");
  expect_value_error([&] { sample(gpt, kPrompt, options(1, 1.0f, -1)); }, "top_k");
}

}  // namespace
}  // namespace mixprec::nn
