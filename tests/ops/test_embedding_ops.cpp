// embedding through the frontend: gradient by double-precision finite differences (duplicates
// and a padding row included), output shape and dtype, 16-bit tables, autocast and errors.
#include <gtest/gtest.h>

#include <limits>

#include <string>

#include "gradcheck.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

TEST(Embedding, GradientMatchesFiniteDifferencesWithDuplicatesAndPadding) {
  const std::int64_t V = 5, D = 3;
  const std::vector<std::int64_t> idx = {4, 1, 1, 0, 2, 1};  // 1 three times; 3 never
  for (std::int64_t pad : {std::int64_t{-1}, std::int64_t{1}}) {
    SCOPED_TRACE("padding_idx " + std::to_string(pad));
    // The double reference: a gather, except that the padding row is a constant (its values
    // reach the output but no gradient flows back to them).
    const std::vector<float> w0 = random_values(V * D, 21);
    gradcheck([&](const Ts& x) { return embedding(x[0], idx, {2, 3}, pad); },
              [&](const Vs& x) {
                VecD y;
                for (std::int64_t i : idx) {
                  for (std::int64_t d = 0; d < D; ++d) {
                    const auto k = static_cast<std::size_t>(i * D + d);
                    y.push_back(i == pad ? static_cast<double>(w0[k]) : x[0][k]);
                  }
                }
                return y;
              },
              {{{V, D}, w0}});
  }
}

TEST(Embedding, OutputShapeValuesAndGradientDtypeFollowTheTable) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Tensor w = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {3, 2}, dt);
    w.set_requires_grad(true);
    const Tensor y = embedding(w, {2, 0, 2, 1}, {2, 2});
    EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.to_vector(), (std::vector<float>{4, 5, 0, 1, 4, 5, 2, 3}));
    sum(y).backward();
    EXPECT_EQ(w.grad().dtype(), dt);
    EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{1, 1, 1, 1, 2, 2}));
    EXPECT_EQ(embedding(w, {1}).shape(), (Shape{1, 2}));  // the 1-d overload
    EXPECT_EQ(embedding(w, {1}, Shape{}).shape(), (Shape{2}));  // a 0-d index: one row
  }
}

TEST(Embedding, AutocastLeavesTheTableDtype) {
  const Tensor w = Tensor::randn({4, 8}, 1);
  runtime::Autocast region(true, DType::bf16);
  EXPECT_EQ(embedding(w, {0, 3}).dtype(), DType::f32);
  EXPECT_EQ(embedding(w.to(DType::f16), {0, 3}).dtype(), DType::f16);
}

TEST(Embedding, BadInputsThrowTypedErrorsNamingTheOp) {
  const Tensor w = Tensor::zeros({4, 3});
  auto expect_msg = [](auto&& fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one mentioning " << part;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("embedding:", 0), 0u) << msg;
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  };
  EXPECT_THROW(embedding(w, {0, 4}), ValueError);
  expect_msg([&] { embedding(w, {0, 4}); }, "index 4");
  expect_msg([&] { embedding(w, {0, 4}); }, "table of 4 rows");
  EXPECT_THROW(embedding(w, {-2}), ValueError);
  EXPECT_THROW(embedding(w, {0}, {1}, 4), ValueError);           // padding_idx outside [0, V)
  EXPECT_THROW(embedding(Tensor::zeros({4}), {0}), ShapeError);   // not a [V, D] table
  EXPECT_THROW(embedding(w, {0, 1, 2}, {2, 2}), ShapeError);      // 3 indices for 4 elements
  expect_msg([&] { embedding(w, {0, 1, 2}, {2, 2}); }, "3 indices");
  EXPECT_THROW(embedding(w.to(DType::f8e4m3), {0}), DTypeError);
}

// Token ids carried by a float tensor (what the data loaders make) give the same rows and the
// same gradient as the same ids passed as integers; a non-whole or out-of-range id is refused.
TEST(Embedding, IdsInATensorMatchIdsInAVector) {
  const Tensor w = Tensor::randn({6, 5}, 3).set_requires_grad();
  const Tensor ids = Tensor::from_vector({5, 0, 2, 2, 1, 5}, {2, 3});
  const Tensor a = embedding_by_ids(w, ids, 1);
  EXPECT_EQ(a.shape(), (Shape{2, 3, 5}));
  const Tensor b = embedding(w, {5, 0, 2, 2, 1, 5}, {2, 3}, 1);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  a.backward(Tensor::ones({2, 3, 5}));
  const std::vector<float> ga = w.grad().to_vector();
  w.set_grad(Tensor());
  b.backward(Tensor::ones({2, 3, 5}));
  EXPECT_EQ(ga, w.grad().to_vector());
  for (float bad : {2.5f, -1.0f, 6.0f, std::numeric_limits<float>::quiet_NaN()}) {
    const Tensor b_ids = Tensor::from_vector({0, bad}, {2});
    EXPECT_THROW(embedding_by_ids(w.detach(), b_ids), ValueError) << bad;
  }
  EXPECT_THROW(embedding_by_ids(w.detach(), ids.to(DType::f8e4m3)), DTypeError);
}

}  // namespace
}  // namespace mixprec::testing
