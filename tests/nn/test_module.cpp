#include <gtest/gtest.h>

#include "mixprec/mixprec.h"
#include "mixprec/nn/layers.h"

namespace mixprec::nn {
namespace {

std::shared_ptr<Sequential> small_mlp(std::uint64_t seed) {
  return sequential({std::make_shared<Flatten>(), std::make_shared<Linear>(6, 4, true, seed),
      std::make_shared<ReLU>(), std::make_shared<Dropout>(0.5f, seed),
      std::make_shared<Linear>(4, 3, true, seed + 1), std::make_shared<GELU>()});
}

TEST(Module, NamedParametersUseDottedPaths) {
  const auto m = small_mlp(1);
  std::vector<std::string> names;
  for (auto& [n, t] : m->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"1.weight", "1.bias", "4.weight", "4.bias"}));
  EXPECT_EQ(m->parameter_count(), 6 * 4 + 4 + 4 * 3 + 3);
  for (const Tensor& p : m->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_EQ(p.category(), MemoryCategory::parameter);
  }
}

TEST(Module, LinearInitIsBoundedAndSeeded) {
  const Linear a(16, 8, true, 3), b(16, 8, true, 3), c(16, 8, true, 4);
  EXPECT_EQ(a.weight().to_vector(), b.weight().to_vector());
  EXPECT_NE(a.weight().to_vector(), c.weight().to_vector());
  for (float v : a.weight().to_vector()) EXPECT_LE(std::abs(v), 0.25f);  // 1/sqrt(16)
}

TEST(Module, TrainEvalControlsDropout) {
  const auto m = small_mlp(2);
  const Tensor x = Tensor::randn({5, 2, 3}, 9);
  m->eval();
  EXPECT_FALSE(m->children()[3].second->is_training());
  const std::vector<float> e1 = m->forward(x).to_vector(), e2 = m->forward(x).to_vector();
  EXPECT_EQ(e1, e2);  // deterministic in eval
  m->train();
  const std::vector<float> t1 = m->forward(x).to_vector(), t2 = m->forward(x).to_vector();
  EXPECT_NE(t1, t2);  // a fresh dropout mask per call
}

TEST(Module, StateDictRoundTripAndMismatchErrors) {
  const auto a = small_mlp(5), b = small_mlp(6);
  const Tensor x = Tensor::randn({2, 6}, 10);
  a->eval();
  b->eval();
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(a->forward(x).to_vector(), b->forward(x).to_vector());
  auto bad = a->state_dict();
  bad["1.weight"] = Tensor::zeros({3, 3});
  EXPECT_THROW(b->load_state_dict(bad), ShapeError);
  auto extra = a->state_dict();
  extra["9.weight"] = Tensor::zeros({1});
  EXPECT_THROW(b->load_state_dict(extra), ValueError);
  auto missing = a->state_dict();
  missing.erase("4.bias");
  EXPECT_THROW(b->load_state_dict(missing), ValueError);
  EXPECT_NO_THROW(b->load_state_dict(missing, /*strict=*/false));
}

TEST(Module, BackwardReachesEveryParameter) {
  const auto m = small_mlp(7);
  const Tensor x = Tensor::randn({8, 6}, 11);
  cross_entropy(m->forward(x), {0, 1, 2, 0, 1, 2, 0, 1}).backward();
  for (auto& [n, p] : m->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_EQ(p.grad().shape(), p.shape()) << n;
  }
}

TEST(Module, BadConstructionArgumentsThrow) {
  EXPECT_THROW(Linear(0, 3), ValueError);
  EXPECT_THROW(Dropout(1.0f), ValueError);
  EXPECT_THROW(Sequential().append(nullptr), ValueError);
  Linear l(4, 2);
  EXPECT_THROW(l.forward(Tensor::zeros({3, 5})), ShapeError);
  EXPECT_THROW(l.forward(Tensor::zeros({3, 4}, DType::bf16)), DTypeError);
}

}  // namespace
}  // namespace mixprec::nn
