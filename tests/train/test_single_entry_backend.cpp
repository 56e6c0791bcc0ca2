// Issue 38, deliverable 4: a backend is a table of what it has plus a fallback for the rest. A
// table with one entry filled (the cpu backend's matmul) and the reference behind it trains: one
// step of an MLP runs, its loss is finite and matches the same step on the reference, and the
// one entry was called.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend_scope.h"
#include "kernels/backend.h"
#include "mixprec/models/zoo.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/train_step.h"

namespace mixprec::train {
namespace {

int& matmul_calls() {
  static int n = 0;
  return n;
}

void counted_cpu_matmul(const kernels::MatmulDesc& desc, const void* a, const void* b,
                        const void* bias, void* c) {
  ++matmul_calls();
  kernels::cpu::matmul(desc, a, b, bias, c);
}

/// matmul from the cpu backend, everything else from the reference (its fallback).
const kernels::Backend& matmul_only() {
  static const kernels::Backend b{.name = "matmul-only",
                                  .fallback = &kernels::ref_backend,
                                  .matmul = &counted_cpu_matmul};
  return b;
}

/// Two training steps of the seed-3 MLP on the active backend: the losses, before each update.
std::vector<double> two_steps() {
  auto model = models::make_model("mlp", 3);
  TrainStep step(*model, StepConfig{.precision = "fp32", .optimizer = "adam", .lr = 1e-3f});
  std::vector<double> losses;
  for (std::uint64_t s = 0; s < 2; ++s) {
    const Tensor x = Tensor::randn({8, 784}, 100 + s);
    std::vector<std::int64_t> y;
    for (int i = 0; i < 8; ++i) y.push_back((i * 3 + static_cast<int>(s)) % 10);
    double loss = 0.0;
    const StepOutcome outcome = step.run([&] { return cross_entropy((*model)(x), y); }, &loss);
    EXPECT_TRUE(outcome.applied);
    losses.push_back(loss);
  }
  return losses;
}

TEST(SingleEntryBackend, TrainsAnMlpWithOneEntryAndTheReferenceFallback) {
  std::vector<double> want;
  {
    testing::BackendScope scope("ref");
    want = two_steps();
  }
  std::vector<double> got;
  matmul_calls() = 0;
  {
    testing::BackendScope use(matmul_only());
    got = two_steps();
  }
  EXPECT_GT(matmul_calls(), 0) << "the one entry of the table never ran";
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(std::isfinite(got[i])) << "step " << i;
    // oneDNN's f32 GEMM sums in another order than the reference's loop.
    EXPECT_NEAR(got[i], want[i], 1e-4 * std::abs(want[i])) << "step " << i;
  }
}

}  // namespace
}  // namespace mixprec::train
