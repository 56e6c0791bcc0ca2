// Parameter groups: per-group learning-rate scale and weight decay, checked against separate
// optimizers over each group (bit for bit), their validation, their state in checkpoints, and the
// GPT weight-decay recipe (no decay on biases, norms and embeddings).
#include <gtest/gtest.h>

#include <cstring>

#include "mixprec/core/error.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/param_groups.h"
#include "mixprec/optim/sgd.h"
#include "mixprec/train/train_step.h"

namespace mixprec::optim {
namespace {

std::vector<Tensor> make_params(int n, std::uint64_t seed) {
  std::vector<Tensor> out;
  for (int i = 0; i < n; ++i) {
    Tensor p = Tensor::randn({3 + i, 5}, seed + static_cast<std::uint64_t>(i));
    p.set_requires_grad(true);
    out.push_back(p);
  }
  return out;
}

void set_grads(const std::vector<Tensor>& ps, std::uint64_t seed) {
  for (std::size_t i = 0; i < ps.size(); ++i) ps[i].set_grad(Tensor::randn(ps[i].shape(), seed + 100 * i));
}

std::vector<Tensor> clones(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) {
    Tensor c = p.contiguous().detach().to(DType::f32);
    Tensor leaf = Tensor::empty(c.shape(), DType::f32);
    std::memcpy(leaf.data_ptr(), c.data_ptr(), c.nbytes());
    leaf.set_requires_grad(true);
    out.push_back(leaf);
  }
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(ParamGroups, EachGroupUpdatesAsItsOwnOptimizerWould) {
  const std::vector<Tensor> all = make_params(4, 1);
  const std::vector<Tensor> copy = clones(all);
  // Grouped: params 0, 2 decay 0.1 at the base lr; 1, 3 no decay at half the lr.
  AdamW grouped(all, AdamWOptions{.lr = 1e-2f, .weight_decay = 0.5f});
  grouped.set_param_groups({{"decay", {all[0], all[2]}, 1.0f, 0.1f}, {"no_decay", {all[1], all[3]}, 0.5f, 0.0f}});
  EXPECT_EQ(grouped.group_count(), 2u);
  EXPECT_EQ(grouped.group_of(3), 1u);
  // The same thing as two optimizers.
  AdamW a({copy[0], copy[2]}, AdamWOptions{.lr = 1e-2f, .weight_decay = 0.1f});
  AdamW b({copy[1], copy[3]}, AdamWOptions{.lr = 5e-3f, .weight_decay = 0.0f});
  for (int step = 0; step < 3; ++step) {
    set_grads(all, 7 + static_cast<std::uint64_t>(step));
    set_grads(copy, 7 + static_cast<std::uint64_t>(step));
    grouped.step();
    a.step();
    b.step();
    grouped.set_lr(grouped.lr() * 0.9f);  // a schedule scales every group alike
    a.set_lr(a.lr() * 0.9f);
    b.set_lr(static_cast<float>(static_cast<double>(grouped.lr()) * 0.5));
  }
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(same_bits(all[i], copy[i])) << i;
}

TEST(ParamGroups, SgdWeightDecayPerGroup) {
  const std::vector<Tensor> all = make_params(2, 3);
  const std::vector<Tensor> copy = clones(all);
  SGD grouped(all, SgdOptions{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f});
  grouped.set_param_groups({{"a", {all[0]}, 1.0f, {}}, {"b", {all[1]}, 1.0f, 0.0f}});
  SGD a({copy[0]}, SgdOptions{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f});
  SGD b({copy[1]}, SgdOptions{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.0f});
  for (int step = 0; step < 2; ++step) {
    set_grads(all, 20);
    set_grads(copy, 20);
    grouped.step();
    a.step();
    b.step();
  }
  EXPECT_TRUE(same_bits(all[0], copy[0]));
  EXPECT_TRUE(same_bits(all[1], copy[1]));
}

TEST(ParamGroups, BadGroupsAreRefusedWithAReason) {
  const std::vector<Tensor> ps = make_params(3, 5);
  Adam opt(ps, AdamOptions{});
  auto message = [&](const std::vector<ParamGroup>& groups) {
    try {
      opt.set_param_groups(groups);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"g", {ps[0], ps[1]}, 1.0f, {}}}).find("parameter 2 is in no group"), std::string::npos);
  EXPECT_NE(message({{"g", {ps[0], ps[1], ps[2]}, 1.0f, {}}, {"h", {ps[1]}, 1.0f, {}}}).find("two groups"),
            std::string::npos);
  const Tensor stranger = make_params(1, 9)[0];
  EXPECT_NE(message({{"g", {ps[0], ps[1], ps[2], stranger}, 1.0f, {}}}).find("not one of this"),
            std::string::npos);
  EXPECT_NE(message({{"g", {ps[0], ps[1], ps[2]}, 0.0f, {}}}).find("lr_scale"), std::string::npos);
  EXPECT_NE(message({{"g", {ps[0], ps[1], ps[2]}, 1.0f, -1.0f}}).find("weight_decay"), std::string::npos);
  EXPECT_EQ(opt.group_count(), 1u);  // nothing changed by the refusals
}

TEST(ParamGroups, GroupsAreSavedAndRestoredWithTheState) {
  const std::vector<Tensor> ps = make_params(2, 11);
  Adam saved(ps, AdamOptions{.lr = 1e-3f, .weight_decay = 0.2f});
  saved.set_param_groups({{"decay", {ps[0]}, 1.0f, {}}, {"no_decay", {ps[1]}, 0.25f, 0.0f}});
  const OptimizerState state = saved.state();

  Adam restored(clones(ps), AdamOptions{.lr = 1e-3f, .weight_decay = 0.2f});
  restored.set_param_groups({{"x", {restored.params()[1]}, 1.0f, {}}, {"y", {restored.params()[0]}, 1.0f, {}}});
  restored.load_state(state);
  EXPECT_EQ(restored.group_of(0), 0u);
  EXPECT_EQ(restored.group_of(1), 1u);
  EXPECT_DOUBLE_EQ(restored.param_lr(1), static_cast<double>(1e-3f) * 0.25);
  EXPECT_EQ(restored.param_weight_decay(1, 0.2f), 0.0f);
  EXPECT_EQ(restored.param_weight_decay(0, 0.2f), 0.2f);

  // An optimizer without groups has no group entries: a grouped state does not fit it.
  Adam plain(clones(ps), AdamOptions{.lr = 1e-3f, .weight_decay = 0.2f});
  EXPECT_THROW(plain.load_state(state), StateError);
}

TEST(ParamGroups, TheGptRecipeKeepsBiasesNormsAndEmbeddingsOutOfDecay) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(8, 16, true, 1), std::make_shared<nn::LayerNorm>(16),
                               std::make_shared<nn::Linear>(16, 4, false, 2)});
  const auto groups = weight_decay_groups(*model, 0.1f, DecayExclusions::parse("bias,norm"));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "decay");
  EXPECT_EQ(groups[0].params.size(), 2u);  // the two weight matrices
  EXPECT_EQ(*groups[0].weight_decay, 0.1f);
  EXPECT_EQ(groups[1].params.size(), 3u);  // the first bias, the norm's weight and bias
  EXPECT_EQ(*groups[1].weight_decay, 0.0f);
  // Without "norm", the norm's weight decays (its bias is still a bias).
  const auto biases_only = weight_decay_groups(*model, 0.1f, DecayExclusions::parse("bias"));
  EXPECT_EQ(biases_only[0].params.size(), 3u);
  EXPECT_EQ(biases_only[1].params.size(), 2u);
  EXPECT_THROW(DecayExclusions::parse("bias,weights"), ValueError);
  EXPECT_FALSE(DecayExclusions::parse("").any());

  // Through the training step: the flag's groups reach the optimizer.
  train::TrainStep step(*model, train::StepConfig{.precision = "fp32", .optimizer = "adamw",
                                                  .weight_decay = 0.1f, .no_decay = "bias,norm"});
  EXPECT_EQ(step.optimizer().group_count(), 2u);
  EXPECT_EQ(step.optimizer().param_weight_decay(1, 0.1f), 0.0f);  // the first Linear's bias
  EXPECT_EQ(step.optimizer().param_weight_decay(0, 0.1f), 0.1f);  // its weight
}

}  // namespace
}  // namespace mixprec::optim
