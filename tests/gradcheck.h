#pragma once
// Finite-difference gradient checks in double precision.
//
// The op under test runs in f32 through mixprec (forward and autograd backward). Its expected
// gradient comes from central differences of an independent double-precision implementation of
// the same forward, so the only f32 error in the comparison is that of mixprec itself.
// The scalar being differentiated is L = sum(out * r) for a fixed random r, which checks every
// output's gradient at once (the backward receives r as the output gradient).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec::testing {

using VecD = std::vector<double>;
/// The op in mixprec: takes the input tensors, returns the output tensor.
using OpF32 = std::function<Tensor(const std::vector<Tensor>&)>;
/// The same op in double on flattened row-major inputs; returns the flattened output.
using OpF64 = std::function<VecD(const std::vector<VecD>&)>;

struct GradcheckInput {
  Shape shape;
  std::vector<float> values;
};

inline std::vector<float> random_values(std::size_t n, std::uint64_t seed, float lo = -2.0f,
                                        float hi = 2.0f) {
  const Tensor t = Tensor::uniform({static_cast<std::int64_t>(n)}, seed, lo, hi);
  return t.to_vector();
}

/// Checks d sum(op(x) * r) / dx_i for every element of every input against double-precision
/// central differences of reference. Tolerance |auto - fd| <= atol + rtol * |fd|.
inline void gradcheck(const OpF32& op, const OpF64& reference,
                      const std::vector<GradcheckInput>& inputs, double atol = 1e-4,
                      double rtol = 2e-3, double h = 1e-6) {
  std::vector<Tensor> xs;
  for (const auto& in : inputs) {
    Tensor t = Tensor::from_vector(in.values, in.shape);
    t.set_requires_grad(true);
    xs.push_back(t);
  }
  const Tensor out = op(xs);
  const std::vector<float> r = random_values(static_cast<std::size_t>(out.numel()), 4242, -1, 1);
  out.backward(Tensor::from_vector(r, out.shape()));

  std::vector<VecD> xd;
  for (const auto& in : inputs) xd.emplace_back(in.values.begin(), in.values.end());
  auto loss = [&](const std::vector<VecD>& args) {
    const VecD y = reference(args);
    EXPECT_EQ(y.size(), r.size()) << "reference output size differs from mixprec's";
    double s = 0.0;
    for (std::size_t i = 0; i < y.size() && i < r.size(); ++i) s += y[i] * r[i];
    return s;
  };
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const Tensor g = xs[k].grad();
    ASSERT_TRUE(g.defined()) << "input " << k << " received no gradient";
    EXPECT_EQ(g.dtype(), DType::f32);
    const std::vector<float> gv = g.to_vector();
    for (std::size_t i = 0; i < xd[k].size(); ++i) {
      std::vector<VecD> plus = xd, minus = xd;
      plus[k][i] += h;
      minus[k][i] -= h;
      const double fd = (loss(plus) - loss(minus)) / (2 * h);
      EXPECT_NEAR(gv[i], fd, atol + rtol * std::abs(fd))
          << "input " << k << " element " << i;
    }
  }
}

}  // namespace mixprec::testing
