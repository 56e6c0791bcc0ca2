// The 16-bit weight copies autocast keeps across steps: the optimizer writes them in its update
// pass, so the next forward casts no weight, and they stay exactly the round-to-nearest-even
// cast of the f32 weight; anything else that changes the weight makes autocast cast afresh.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/weight_copies.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/nn/layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/runtime/node.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::runtime {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

TEST(WeightCopies, TheOptimizerWritesTheCopyAndTheNextForwardCastsNoWeight) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(name(dtype));
    detail::clear_weight_copies();
    nn::Linear layer(16, 8, true, 1);
    optim::Adam opt(layer.parameters(), optim::AdamOptions{.lr = 1e-2f});
    const Tensor x = Tensor::randn({4, 16}, 3);
    std::uint64_t casts[3];
    for (int s = 0; s < 3; ++s) {
      reset_cast_stats();
      Tensor loss;
      {
        Autocast region(true, dtype);
        loss = sum(layer(x));
      }
      casts[s] = cast_stats().casts;
      loss.backward();
      loss = Tensor();  // frees the graph and the copy it saved, as a training loop does
      opt.step();
      opt.zero_grad();
      // The copy the optimizer wrote is the exact cast of the updated f32 weight.
      const Tensor copy = detail::current_weight_copy(layer.weight(), dtype);
      ASSERT_TRUE(copy.defined());
      EXPECT_TRUE(same_bits(copy, layer.weight().to(dtype)));
    }
    // Step 1 casts x, the weight and the bias down and the output up (sum runs in fp32); later
    // steps cast only the activations: the weight and bias copies come from the optimizer.
    EXPECT_EQ(casts[0], 4u);
    EXPECT_EQ(casts[1], 2u);
    EXPECT_EQ(casts[2], 2u);
  }
}

TEST(WeightCopies, AnyOtherChangeToTheWeightMakesAutocastCastAgain) {
  detail::clear_weight_copies();
  nn::Linear layer(16, 8, false, 2);
  const Tensor x = Tensor::randn({2, 16}, 4);
  { Autocast region(true, DType::bf16); (void)layer(x); }
  ASSERT_TRUE(detail::current_weight_copy(layer.weight(), DType::bf16).defined());
  // An in-place change outside the optimizer bumps the version: the copy is stale.
  {
    runtime::NoGradGuard no_grad;
    static_cast<float*>(layer.weight().data_ptr())[0] = 42.0f;
    layer.weight().bump_version();
  }
  EXPECT_FALSE(detail::current_weight_copy(layer.weight(), DType::bf16).defined());
  reset_cast_stats();
  Tensor y;
  { Autocast region(true, DType::bf16); y = layer(x); }
  EXPECT_EQ(cast_stats().casts, 2u);  // x and the weight
  EXPECT_TRUE(same_bits(detail::current_weight_copy(layer.weight(), DType::bf16),
                        layer.weight().to(DType::bf16)));
  // A copy of another dtype is not served for this one.
  EXPECT_FALSE(detail::current_weight_copy(layer.weight(), DType::f16).defined());
}

TEST(WeightCopies, ACopyStillReferencedElsewhereIsNeverOverwritten) {
  detail::clear_weight_copies();
  nn::Linear layer(16, 8, false, 5);
  optim::SGD opt(layer.parameters(), optim::SgdOptions{.lr = 0.1f});
  const Tensor x = Tensor::randn({2, 16}, 6);
  Tensor loss;
  { Autocast region(true, DType::bf16); loss = sum(layer(x)); }
  const Tensor held = detail::current_weight_copy(layer.weight(), DType::bf16);
  const Tensor before = held.to(DType::f32);
  loss.backward();
  opt.step();
  // The caller's handle kept the copy shared: the optimizer left it alone, and it is stale now.
  EXPECT_TRUE(same_bits(held.to(DType::f32), before));
  EXPECT_FALSE(detail::current_weight_copy(layer.weight(), DType::bf16).defined());
}

}  // namespace
}  // namespace mixprec::runtime
