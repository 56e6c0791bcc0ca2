// GPT: shapes, the tied head, causality, bad input, and a tiny model learning a sequence through
// TrainStep in bf16 and fp16 (autocast, the scaler, fp32 softmax in attention, weight decay
// groups): the whole mixed-precision stack on a transformer.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/core/error.h"
#include "mixprec/nn/gpt.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/train_step.h"

namespace mixprec::nn {
namespace {

GptConfig tiny() {
  return GptConfig{.vocab_size = 16, .context = 16, .d_model = 32, .n_heads = 2, .n_layers = 2,
                   .dropout = 0.0f, .seed = 1};
}

TEST(Gpt, ShapesTiedHeadAndCausality) {
  GptConfig c = tiny();
  c.vocab_size = 20;  // unlike the context (16), so the token table is the only [20, d] matrix
  GPT gpt(c);
  std::vector<std::int64_t> ids{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const Tensor logits = gpt.logits(ids, 2, 5);
  EXPECT_EQ(logits.shape(), (Shape{2, 5, 20}));
  // The head is the token table: no separate output matrix among the parameters.
  std::int64_t matrices_of_vocab_rows = 0;
  for (const auto& [name, p] : gpt.named_parameters()) {
    if (p.dim() == 2 && p.size(0) == 20) ++matrices_of_vocab_rows;
  }
  EXPECT_EQ(matrices_of_vocab_rows, 1);
  // Changing the last token changes only the last position's logits.
  std::vector<std::int64_t> changed = ids;
  changed[4] = 15;
  const std::vector<float> a = logits.to_vector(), b = gpt.logits(changed, 2, 5).to_vector();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool last_of_first = i >= 4 * 20 && i < 5 * 20;
    if (!last_of_first) {
      EXPECT_EQ(a[i], b[i]) << i;
    }
  }
  EXPECT_NE(std::vector<float>(a.begin() + 80, a.begin() + 100), std::vector<float>(b.begin() + 80, b.begin() + 100));
  // The Module interface takes ids as a tensor of whole numbers.
  Tensor id_tensor = Tensor::empty({2, 5});
  for (int i = 0; i < 10; ++i) static_cast<float*>(id_tensor.data_ptr())[i] = static_cast<float>(ids[static_cast<std::size_t>(i)]);
  EXPECT_EQ(gpt(id_tensor).to_vector(), a);
  EXPECT_THROW(gpt.logits(std::vector<std::int64_t>(17, 0), 1, 17), ValueError);  // beyond the context
  EXPECT_THROW(gpt.logits({1, 2, 99}, 1, 3), ValueError);                          // not in the vocabulary
  static_cast<float*>(id_tensor.data_ptr())[3] = 2.5f;
  EXPECT_THROW(gpt(id_tensor), ValueError);
}

// Next-token prediction on a fixed cycle of 8 tokens: a model that learns it reaches a loss near 0.
double train_cycle(const char* precision, int steps) {
  GPT gpt(tiny());
  train::TrainStep step(gpt, train::StepConfig{.precision = precision, .optimizer = "adamw", .lr = 3e-3f,
                                               .weight_decay = 0.01f, .no_decay = "bias,norm,embedding",
                                               .clip = 1.0f});
  const std::int64_t batch = 4, t = 12;
  std::vector<std::int64_t> inputs, targets;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < t; ++i) {
      inputs.push_back((b + i) % 8 + 3);
      targets.push_back((b + i + 1) % 8 + 3);
    }
  }
  double loss = 0;
  for (int s = 0; s < steps; ++s) {
    step.run([&] { return cross_entropy(gpt.logits(inputs, batch, t).reshape({batch * t, 16}), targets); },
             &loss);
  }
  return loss;
}

TEST(Gpt, LearnsASequenceInEveryPrecision) {
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    const double first = train_cycle(precision, 1), last = train_cycle(precision, 120);
    EXPECT_GT(first, 2.0);  // about ln 16 = 2.77 at the start
    EXPECT_LT(last, 0.2);
  }
}

}  // namespace
}  // namespace mixprec::nn
