// The fp8 layer policy (nn::Fp8Layers): every Linear but the first and the last, by path; a
// model with fewer than three Linears refused in one line; inside an Fp8Scope the chosen layers
// run fp8_linear with their own state and the others stay plain; outside it every layer is
// plain; the state tensors are named for a checkpoint.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/ops/fp8_linear.h"
#include "mixprec/ops/nn_functional.h"

namespace mixprec::nn {
namespace {

std::shared_ptr<Sequential> four_linears() {
  return sequential({std::make_shared<Linear>(8, 16, true, 1), std::make_shared<ReLU>(),
                     std::make_shared<Linear>(16, 16, true, 2), std::make_shared<Linear>(16, 16, true, 3),
                     std::make_shared<Linear>(16, 4, true, 4)});
}

TEST(Fp8Layers, EveryLinearButTheFirstAndTheLast) {
  auto model = four_linears();
  Fp8Layers layers(*model, amp::Fp8Recipe{});
  EXPECT_EQ(layers.paths(), (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(layers.state_tensors().size(), 2u * 9u);
  EXPECT_EQ(layers.state_tensors().count("2.fp8_grad_history"), 1u);
  EXPECT_THROW(layers.state("0"), ValueError);
}

TEST(Fp8Layers, RefusesAModelWithoutAMiddleLinear) {
  auto model = sequential({std::make_shared<Linear>(4, 4), std::make_shared<Linear>(4, 4)});
  try {
    Fp8Layers layers(*model, amp::Fp8Recipe{});
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 3"), std::string::npos) << e.what();
  }
}

TEST(Fp8Layers, TheScopeSwitchesOnlyTheChosenLayers) {
  auto model = four_linears();
  Fp8Layers layers(*model, amp::Fp8Recipe{});
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
  Fp8LinearState fresh(amp::Fp8Recipe{});
  EXPECT_EQ(in_scope.to_vector(), fp8_linear(x, middle->weight(), middle->bias(), fresh).to_vector());
  EXPECT_NE(in_scope.to_vector(), plain.to_vector());  // E4M3 rounding shows
  EXPECT_EQ(first_in_scope.to_vector(),
            linear(Tensor::randn({5, 8}, 10), first->weight(), first->bias()).to_vector());
  EXPECT_EQ((*middle)(x).to_vector(), plain.to_vector());  // outside the scope: plain again
  EXPECT_FALSE(layers.take_found_inf());
}

}  // namespace
}  // namespace mixprec::nn
