#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

TEST(Tensor, FactoriesShapeAndDtype) {
  const Tensor t = Tensor::full({2, 3}, 1.5f, DType::bf16);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.dtype(), DType::bf16);
  EXPECT_EQ(t.nbytes(), 12u);
  EXPECT_EQ(t.to_vector(), std::vector<float>(6, 1.5f));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64, 0u);
  EXPECT_EQ(Tensor::zeros({4}, DType::f16).to_vector(), std::vector<float>(4, 0.0f));
  EXPECT_FLOAT_EQ(Tensor::scalar(3.0f).item(), 3.0f);
}

TEST(Tensor, FromVectorRoundsToDtype) {
  const Tensor t = Tensor::from_vector({1.0f + 1.0f / 256}, {1}, DType::bf16);
  EXPECT_EQ(t.item(), 1.0f);  // ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7
  EXPECT_THROW(Tensor::from_vector({1, 2, 3}, {2, 2}), ShapeError);
}

TEST(Tensor, ViewsShareStorage) {
  const Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor tt = t.transpose(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.to_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  const Tensor s = t.slice(1, 1, 3);
  EXPECT_EQ(s.to_vector(), (std::vector<float>{1, 2, 4, 5}));
  const Tensor r = t.reshape({3, -1});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.data_ptr(), t.data_ptr());  // a view, no copy
  const Tensor p = Tensor::zeros({2, 3, 4}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  const Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector(), tt.to_vector());
  EXPECT_THROW(t.reshape({4, 2}), ShapeError);
  EXPECT_THROW(t.transpose(0, 2), ValueError);
  EXPECT_THROW(p.permute({0, 0, 1}), ShapeError);
}

TEST(Tensor, CastsRoundToNearestEven) {
  const Tensor t = Tensor::from_vector({65504.0f, 65520.0f, 1e-8f}, {3});
  const std::vector<float> h = t.to(DType::f16).to_vector();
  EXPECT_EQ(h[0], 65504.0f);
  EXPECT_TRUE(std::isinf(h[1]));
  EXPECT_EQ(h[2], 0.0f);  // below half the smallest f16 subnormal
  EXPECT_EQ(t.to(DType::f32).data_ptr(), t.data_ptr());  // same dtype: no copy
}

TEST(Tensor, UndefinedTensorUseThrowsStateError) {
  Tensor a = Tensor::ones({2});
  Tensor b = std::move(a);
  EXPECT_FALSE(a.defined());  // NOLINT(bugprone-use-after-move): the point of the test
  try {
    (void)a.shape();
    FAIL() << "expected StateError";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("moved-from"), std::string::npos);
  }
  EXPECT_THROW(add(a, b), StateError);
  EXPECT_THROW(relu(Tensor()), StateError);
}

TEST(Tensor, RandomFactoriesAreReproducible) {
  const Tensor a = Tensor::randn({1000}, 7), b = Tensor::randn({1000}, 7), c = Tensor::randn({1000}, 8);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  EXPECT_NE(a.to_vector(), c.to_vector());
  double mean = 0, var = 0;
  for (float v : a.to_vector()) mean += v;
  mean /= 1000;
  for (float v : a.to_vector()) var += (v - mean) * (v - mean);
  var /= 999;
  EXPECT_NEAR(mean, 0.0, 0.12);  // 4 standard errors of the mean of 1000 N(0,1) samples
  EXPECT_NEAR(var, 1.0, 0.2);
}

// randn fills large tensors across threads in chunks: the values must not depend on how many.
TEST(Tensor, RandnIsTheSameOnAnyThreadCount) {
  const int threads = num_threads();
  set_num_threads(1);
  const std::vector<float> one = Tensor::randn({300001}, 5).to_vector();
  set_num_threads(2);
  const std::vector<float> two = Tensor::randn({300001}, 5).to_vector();
  set_num_threads(threads);
  EXPECT_EQ(one, two);
  // Element i is a function of (seed, i) alone: a short tensor is a prefix of a long one.
  const std::vector<float> prefix = Tensor::randn({1000}, 5).to_vector();
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), one.begin()));
}

TEST(MemoryTracker, CountsBytesByCategoryAndPeak) {
  const MemoryStats before = memory_stats();
  reset_peak_memory();
  {
    Tensor w = Tensor::zeros({1024}, DType::f32, MemoryCategory::parameter);
    Tensor a = Tensor::zeros({512}, DType::bf16);
    const MemoryStats during = memory_stats();
    EXPECT_EQ(during.current_of(MemoryCategory::parameter) - before.current_of(MemoryCategory::parameter), 4096u);
    EXPECT_EQ(during.current_of(MemoryCategory::activation) - before.current_of(MemoryCategory::activation), 1024u);
    w.set_category(MemoryCategory::optimizer_state);
    EXPECT_EQ(memory_stats().current_of(MemoryCategory::optimizer_state) -
                  before.current_of(MemoryCategory::optimizer_state), 4096u);
  }
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.total_current, before.total_current);
  EXPECT_GE(after.total_peak, before.total_current + 5120u);
  EXPECT_GE(after.peak_of(MemoryCategory::optimizer_state),
            before.current_of(MemoryCategory::optimizer_state) + 4096u);
  reset_peak_memory();
  EXPECT_EQ(memory_stats().total_peak, memory_stats().total_current);
}

}  // namespace
}  // namespace mixprec
