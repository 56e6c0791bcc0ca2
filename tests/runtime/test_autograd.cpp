#include <gtest/gtest.h>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

Tensor leaf(const std::vector<float>& v, const Shape& s, DType dtype = DType::f32) {
  Tensor t = Tensor::from_vector(v, s, dtype);
  t.set_requires_grad(true);
  return t;
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1, 2, 3}, {3});
  sum(x * 2.0f).backward();
  sum(x * 3.0f).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{5, 5, 5}));
}

TEST(Autograd, Fp32LeafGetsFp32GradientFromBf16Compute) {
  Tensor w = leaf({0.5f, -0.25f, 2.0f}, {3});
  const Tensor y = sum(cast(w, DType::bf16) * 3.0f);
  EXPECT_EQ(y.dtype(), DType::bf16);
  y.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(w.grad().category(), MemoryCategory::gradient);
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{3, 3, 3}));
}

// The engine hands a gradient nobody else holds to the leaf as its .grad without a copy; one that
// is shared (here the same gradient flows to both operands of an add) must be copied, or an
// in-place change to one leaf's .grad would show in the other's.
TEST(Autograd, SharedGradientIsNotAdoptedByTwoLeaves) {
  Tensor a = leaf({1, 2, 3}, {3});
  Tensor b = leaf({4, 5, 6}, {3});
  (a + b).backward(Tensor::from_vector({1, 1, 1}, {3}));
  ASSERT_TRUE(a.grad().defined() && b.grad().defined());
  EXPECT_NE(a.grad().data_ptr(), b.grad().data_ptr());
  sum(a * 2.0f).backward();  // accumulates into a.grad in place
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{3, 3, 3}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(a.grad().category(), MemoryCategory::gradient);
  EXPECT_EQ(b.grad().category(), MemoryCategory::gradient);
}

// A gradient passed by the caller must not become the leaf's .grad: the caller still holds it.
TEST(Autograd, CallerGradientIsNotAdopted) {
  Tensor a = leaf({1, 2}, {2});
  Tensor seed = Tensor::from_vector({1, 1}, {2});
  a.backward(seed);  // the root is the leaf: the seed itself reaches its accumulator
  sum(a * 1.0f).backward();
  EXPECT_EQ(seed.to_vector(), (std::vector<float>{1, 1}));
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{2, 2}));
}

TEST(Autograd, NonScalarBackwardNeedsGradient) {
  Tensor x = leaf({1, 2}, {2});
  const Tensor y = x * 2.0f;
  try {
    y.backward();
    FAIL() << "expected StateError";
  } catch (const StateError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("backward:", 0), 0u) << e.what();
  }
  y.backward(Tensor::from_vector({1, 10}, {2}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2, 20}));
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1, 2}, {2});
  const Tensor y = sum(x * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // allowed: the first call retained the graph
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{4, 8}));
  EXPECT_THROW(y.backward(), StateError);
}

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y;
  {
    runtime::NoGradGuard guard;
    EXPECT_FALSE(runtime::grad_enabled());
    y = x * 2.0f;
  }
  EXPECT_TRUE(runtime::grad_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(sum(y).backward(), StateError);
}

TEST(Autograd, BackwardOnTensorWithoutGradIsAnError) {
  const Tensor x = Tensor::ones({2});
  EXPECT_THROW(sum(x).backward(), StateError);
}

TEST(Autograd, DiamondGraphRunsEachNodeOnce) {
  // y = a*b + a*c with shared a: a's gradient is b + c.
  Tensor a = leaf({2}, {1}), b = leaf({3}, {1}), c = leaf({5}, {1});
  const Tensor p = a * b, q = a * c;
  sum(p + q).backward();
  EXPECT_FLOAT_EQ(a.grad().item(), 8.0f);
  EXPECT_FLOAT_EQ(b.grad().item(), 2.0f);
  EXPECT_FLOAT_EQ(c.grad().item(), 2.0f);
}

TEST(Autograd, BranchWithoutGradientStillLetsOthersFlow) {
  // A node reachable only through an input that does not need grad must not block the engine.
  Tensor x = leaf({1, 2}, {2});
  const Tensor constant = Tensor::ones({2});
  const Tensor y = sum(x * constant + x);
  y.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2, 2}));
}

TEST(Autograd, SetRequiresGradOnNonLeafIsAnError) {
  Tensor x = leaf({1}, {1});
  Tensor y = x * 2.0f;
  EXPECT_THROW(y.set_requires_grad(false), StateError);
}

}  // namespace
}  // namespace mixprec
