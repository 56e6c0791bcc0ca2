// masked_fill and causal_mask through the frontend: gradient by double-precision finite
// differences with a broadcast mask, values and dtypes, the causal attention pattern, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "gradcheck.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

TEST(MaskedFill, GradientMatchesFiniteDifferencesWithABroadcastMask) {
  // x [2, 4, 4], mask the causal [4, 4] broadcast over the first dimension.
  const Tensor mask = causal_mask(4);
  const std::vector<float> mv = mask.to_vector();
  gradcheck([&](const Ts& x) { return masked_fill(x[0], mask, -3.0f); },
            [&](const Vs& x) {
              VecD y(x[0].size());
              for (std::size_t i = 0; i < y.size(); ++i) y[i] = mv[i % 16] != 0 ? -3.0 : x[0][i];
              return y;
            },
            {{{2, 4, 4}, random_values(32, 3)}});
}

TEST(MaskedFill, CausalSoftmaxGivesEachQueryOnlyItsPast) {
  const std::int64_t T = 5;
  const Tensor scores = Tensor::randn({2, T, T}, 4);
  const float inf = std::numeric_limits<float>::infinity();
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const Tensor p = softmax(masked_fill(scores.to(dt), causal_mask(T, dt), -inf));
    EXPECT_EQ(p.dtype(), dt);
    const std::vector<float> v = p.to_vector();
    for (std::int64_t b = 0; b < 2; ++b) {
      for (std::int64_t i = 0; i < T; ++i) {
        double row = 0;
        for (std::int64_t j = 0; j < T; ++j) {
          const float pij = v[static_cast<std::size_t>((b * T + i) * T + j)];
          if (j > i) {
            EXPECT_EQ(pij, 0.0f) << name(dt) << " i=" << i << " j=" << j;
          }
          row += pij;
        }
        EXPECT_NEAR(row, 1.0, 3 * traits(dt).epsilon) << name(dt);
      }
    }
  }
}

TEST(MaskedFill, GradientIsZeroWhereFilledAndKeepsXsDtype) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, dt);
    x.set_requires_grad(true);
    const Tensor m = Tensor::from_vector({0, 1, 0}, {3}, DType::bf16);  // a row mask
    const Tensor y = masked_fill(x, m, 9.0f);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.to_vector(), (std::vector<float>{1, 9, 3, 4, 9, 6}));
    sum(y * 2.0f).backward();
    EXPECT_EQ(x.grad().dtype(), dt);
    EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2, 0, 2, 2, 0, 2}));
  }
}

TEST(MaskedFill, CausalMaskIsStrictlyUpperTriangular) {
  EXPECT_EQ(causal_mask(3).to_vector(), (std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(causal_mask(3, DType::bf16).dtype(), DType::bf16);
  EXPECT_EQ(causal_mask(0).numel(), 0);
  EXPECT_FALSE(causal_mask(4).requires_grad());
  EXPECT_THROW(causal_mask(-1), ValueError);
  // A context long enough for vector tails and threads (the mask is built by kernels).
  const std::int64_t t = 517;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const std::vector<float> m = causal_mask(t, dt).to_vector();
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < t; ++i) {
      for (std::int64_t j = 0; j < t; ++j) wrong += m[static_cast<std::size_t>(i * t + j)] != (j > i ? 1.0f : 0.0f);
    }
    EXPECT_EQ(wrong, 0) << name(dt);
  }
}

TEST(MaskedFill, BadInputsThrowTypedErrorsNamingTheOp) {
  const Tensor x = Tensor::zeros({2, 3});
  try {
    masked_fill(x, Tensor::zeros({2}), 0.0f);  // [2] does not broadcast to [2, 3]
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("masked_fill:", 0), 0u) << e.what();
  }
  // The mask may not grow x: [2, 3] with a [4, 2, 3] mask would need a broadcast output.
  EXPECT_THROW(masked_fill(x, Tensor::zeros({4, 2, 3}), 0.0f), ShapeError);
  EXPECT_THROW(masked_fill(x, Tensor::zeros({2, 3}).to(DType::f8e5m2), 0.0f), DTypeError);
  EXPECT_THROW(masked_fill(x.to(DType::f8e4m3), Tensor::zeros({2, 3}), 0.0f), DTypeError);
}

}  // namespace
}  // namespace mixprec::testing
