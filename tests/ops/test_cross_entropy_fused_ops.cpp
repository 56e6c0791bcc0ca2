// cross_entropy with expected_grad (the gradient computed in the forward) against the plain op:
// the same loss and gradient bits when backward brings the promised dy (f32 logits, and bf16
// logits from a linear under autocast, on ref, cpu and devsim), the right gradient within
// rounding when it brings another, a retained graph refused a second time, strided logits, no logits kept
// alive by the node, the plain op without grad, argument errors, and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend_scope.h"
#include "gradcheck.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

constexpr std::int64_t kRows = 12, kCols = 37, kIn = 16;

std::vector<std::int64_t> targets() {
  std::vector<std::int64_t> t(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) t[r] = (r * 11 + 5) % kCols;
  return t;
}

Tensor scalar(float v) { return Tensor::full({}, v); }

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

/// One forward and backward: the loss and the gradient of the leaf (the logits themselves, or
/// the weight of the linear that makes them under autocast bf16).
struct Result {
  Tensor loss, grad;
};
Result step(bool autocast, float smoothing, const Tensor* expected, float dy) {
  const Tensor x = Tensor::uniform({kRows, kIn}, 7, -1.0f, 1.0f);
  Tensor leaf = autocast ? Tensor::uniform({kCols, kIn}, 8, -2.0f, 2.0f)
                         : Tensor::uniform({kRows, kCols}, 9, -6.0f, 6.0f);
  leaf.set_requires_grad(true);
  Tensor loss;
  {
    runtime::Autocast region(autocast, DType::bf16);
    const Tensor logits = autocast ? linear(x, leaf) : leaf;
    if (autocast) {
      EXPECT_EQ(logits.dtype(), DType::bf16);
    }
    loss = expected != nullptr ? cross_entropy(logits, targets(), smoothing, *expected)
                               : cross_entropy(logits, targets(), smoothing);
  }
  loss.backward(scalar(dy));
  return {loss, leaf.grad()};
}

TEST(CrossEntropyFusedOp, KeptPromiseGivesThePlainOpsBits) {
  for (const char* backend : {"ref", "cpu", "devsim"}) {
    BackendScope scope(backend);
    for (bool autocast : {false, true}) {
      for (float smoothing : {0.0f, 0.1f}) {
        // A training step's promise: 1 * 1024 (the scale) * 0.25 (1 / accum).
        const float dy = 256.0f;
        const Tensor expected = scalar(dy);
        const Result plain = step(autocast, smoothing, nullptr, dy);
        const Result fused = step(autocast, smoothing, &expected, dy);
        const std::string what = std::string(backend) + (autocast ? " autocast" : " f32") +
                                 " s=" + std::to_string(smoothing);
        EXPECT_TRUE(same_bits(fused.loss, plain.loss)) << what;
        EXPECT_TRUE(same_bits(fused.grad, plain.grad)) << what;
      }
    }
  }
}

TEST(CrossEntropyFusedOp, BrokenPromiseIsStillCorrect) {
  for (const char* backend : {"cpu", "devsim"}) {
    BackendScope scope(backend);
    for (bool autocast : {false, true}) {
      const Tensor expected = scalar(256.0f);
      const float dy = 0.3f;  // not the promised 256: the saved gradient is rescaled
      const Result plain = step(autocast, 0.1f, nullptr, dy);
      const Result fused = step(autocast, 0.1f, &expected, dy);
      EXPECT_TRUE(same_bits(fused.loss, plain.loss));
      const std::vector<float> g = fused.grad.to_vector(), want = plain.grad.to_vector();
      ASSERT_EQ(g.size(), want.size());
      // Rounded twice: to the logits' dtype in the forward, then after the rescale (bf16
      // logits: two bf16 roundings, carried into the linear's weight gradient).
      const double rel = autocast ? 2.0 * 0.0078125 : 4.0 * 1.2e-7;
      double max_want = 0;
      for (float v : want) max_want = std::max(max_want, static_cast<double>(std::abs(v)));
      for (std::size_t i = 0; i < g.size(); ++i) {
        EXPECT_NEAR(g[i], want[i], rel * max_want) << backend << " element " << i;
      }
    }
  }
}

// The gradient goes to the first backward (the engine may adopt it as the leaf's .grad and add
// into it later), so a second backward through a retained graph is refused in one line, and the
// first backward's gradient, accumulated into, is not changed behind the leaf's back.
TEST(CrossEntropyFusedOp, RetainedGraphGivesItsGradientOnce) {
  Tensor logits = Tensor::uniform({kRows, kCols}, 9, -6.0f, 6.0f);
  logits.set_requires_grad(true);
  const Tensor loss = cross_entropy(logits, targets(), 0.0f, scalar(1.0f));
  loss.backward(scalar(-2.0f), /*retain_graph=*/true);  // a broken promise: rescaled by -2
  const std::vector<float> once = logits.grad().to_vector();
  try {
    loss.backward(scalar(1.0f), /*retain_graph=*/true);
    FAIL() << "a second backward through the fused cross-entropy must be refused";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
  EXPECT_EQ(logits.grad().to_vector(), once);
  // The plain op's gradient for dy = 1, times -2 (exact in f32): the rescaled one.
  Tensor plain_logits = logits.detach().clone();
  plain_logits.set_requires_grad(true);
  cross_entropy(plain_logits, targets(), 0.0f).backward(scalar(1.0f));
  const std::vector<float> plain = plain_logits.grad().to_vector();
  ASSERT_EQ(plain.size(), once.size());
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_EQ(once[i], -2.0f * plain[i]) << i;
}

TEST(CrossEntropyFusedOp, StridedLogitsAndNoGrad) {
  Tensor base = Tensor::uniform({kCols, kRows}, 10, -6.0f, 6.0f);
  base.set_requires_grad(true);
  const Tensor expected = scalar(1.0f);
  const Tensor fused = cross_entropy(base.transpose(0, 1), targets(), 0.1f, expected);
  fused.backward(expected);
  const Tensor fused_grad = base.grad();
  base.set_grad(Tensor());
  const Tensor plain = cross_entropy(base.transpose(0, 1), targets(), 0.1f);
  plain.backward(expected);
  EXPECT_TRUE(same_bits(fused, plain));
  EXPECT_TRUE(same_bits(fused_grad, base.grad()));
  // Without grad the fused overload is the plain op: no node, the same loss.
  runtime::NoGradGuard no_grad;
  const Tensor eval = cross_entropy(base.transpose(0, 1), targets(), 0.1f, expected);
  EXPECT_FALSE(eval.requires_grad());
  EXPECT_TRUE(same_bits(eval, plain));
}

// The node saves the gradient, not the logits: once the caller drops them, they are gone
// before backward (the plain op's node keeps them alive until its backward has run).
TEST(CrossEntropyFusedOp, TheNodeKeepsNoLogits) {
  for (bool fused : {false, true}) {
    Tensor w = Tensor::uniform({kCols, kIn}, 8, -2.0f, 2.0f);
    w.set_requires_grad(true);
    const Tensor x = Tensor::uniform({kRows, kIn}, 7, -1.0f, 1.0f);
    std::weak_ptr<Storage> logits_storage;
    Tensor loss;
    {
      const Tensor logits = linear(x, w);
      logits_storage = logits.impl().storage;
      loss = fused ? cross_entropy(logits, targets(), 0.0f, scalar(1.0f))
                   : cross_entropy(logits, targets());
    }
    EXPECT_EQ(logits_storage.expired(), fused);
    loss.backward();
    EXPECT_TRUE(logits_storage.expired());
  }
}

TEST(CrossEntropyFusedOp, ArgumentErrors) {
  Tensor logits = Tensor::uniform({kRows, kCols}, 9, -6.0f, 6.0f);
  logits.set_requires_grad(true);
  EXPECT_THROW(cross_entropy(logits, targets(), 0.0f, Tensor()), StateError);
  EXPECT_THROW(cross_entropy(logits, targets(), 0.0f, Tensor::full({1}, 1.0f)), ValueError);
  EXPECT_THROW(cross_entropy(logits, targets(), 0.0f, Tensor::full({}, 1.0f, DType::bf16)),
               ValueError);
  std::vector<std::int64_t> bad = targets();
  bad[3] = kCols;
  EXPECT_THROW(cross_entropy(logits, bad, 0.0f, scalar(1.0f)), ValueError);
}

// Finite differences in double: gradcheck seeds backward with its own random r, so the kept
// promise is that r (the gradient returned as saved) and a broken one is 1 (rescaled).
TEST(CrossEntropyFusedOp, Gradcheck) {
  const std::vector<std::int64_t> t{2, 0, 5, 1};
  const float seed = random_values(1, 4242, -1, 1)[0];  // gradcheck's r for a scalar output
  for (float smoothing : {0.0f, 0.1f}) {
    for (float promised : {seed, 1.0f}) {
      gradcheck([&](const Ts& x) { return cross_entropy(x[0], t, smoothing, scalar(promised)); },
                [&](const Vs& x) {
                  double loss = 0;
                  for (int r = 0; r < 4; ++r) {
                    double m = -INFINITY, sum = 0, all = 0;
                    for (int c = 0; c < 6; ++c) m = std::max(m, x[0][r * 6 + c]);
                    for (int c = 0; c < 6; ++c) sum += std::exp(x[0][r * 6 + c] - m);
                    const double lse = m + std::log(sum);
                    for (int c = 0; c < 6; ++c) all += x[0][r * 6 + c] - lse;
                    loss += -(1 - smoothing) * (x[0][r * 6 + t[r]] - lse) - smoothing / 6 * all;
                  }
                  return VecD{loss / 4};
                },
                {{{4, 6}, random_values(24, 24)}});
    }
  }
}

}  // namespace
}  // namespace mixprec::testing
