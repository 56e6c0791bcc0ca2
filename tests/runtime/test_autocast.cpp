#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <map>

#include "mixprec/mixprec.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::runtime {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// Runners for the ops that are not generated elementwise functions.
std::map<OpKind, Fn> other_op_runners() {
  const Tensor w = Tensor::randn({8, 8}, 3);
  const Tensor m = Tensor::randn({8, 5}, 4);
  const std::vector<std::int64_t> targets{0, 1, 2, 3};
  return {
      {OpKind::matmul, [m](const Tensor& x) { return matmul(x, m); }},
      {OpKind::bmm, [](const Tensor& x) { return matmul(x.reshape({2, 2, 8}), x.reshape({2, 8, 2})); }},
      {OpKind::linear, [w](const Tensor& x) { return linear(x, w); }},
      {OpKind::addmm, [m](const Tensor& x) { return addmm(Tensor::ones({5}), x, m); }},
      {OpKind::softmax, [](const Tensor& x) { return softmax(x); }},
      {OpKind::log_softmax, [](const Tensor& x) { return log_softmax(x); }},
      {OpKind::cross_entropy, [targets](const Tensor& x) { return cross_entropy(x, targets); }},
      {OpKind::mse_loss, [](const Tensor& x) { return mse_loss(x, x * 0.5f); }},
      {OpKind::pow, [](const Tensor& x) { return pow(abs(x), 1.5f); }},
      {OpKind::sum, [](const Tensor& x) { return sum(x, 1); }},
      {OpKind::mean, [](const Tensor& x) { return mean(x); }},
      {OpKind::norm, [](const Tensor& x) { return norm(x); }},
      {OpKind::cumsum, [](const Tensor& x) { return cumsum(x); }},
      {OpKind::cat, [](const Tensor& x) { return cat({x, x}, 1); }},
      {OpKind::stack, [](const Tensor& x) { return stack({x, x}); }},
      {OpKind::where, [](const Tensor& x) { return where(x, x, x); }},
      {OpKind::affine, [](const Tensor& x) { return affine(x, 2.0f, 1.0f); }},
      {OpKind::amax, [](const Tensor& x) { return amax(x, 1); }},
      {OpKind::dropout, [](const Tensor& x) { return dropout(x, 0.5f, true, 1); }},
      {OpKind::conv2d, [](const Tensor& x) { return conv2d(x.reshape({2, 1, 4, 4}), Tensor::ones({2, 1, 3, 3})); }},
      {OpKind::layer_norm, [](const Tensor& x) { return layer_norm(x, 1, Tensor(), Tensor()); }},
      {OpKind::batch_norm, [](const Tensor& x) {
         Tensor mean = Tensor::zeros({4}), var = Tensor::ones({4});
         return batch_norm(x.reshape({2, 4, 4}), mean, var, Tensor(), Tensor(), true);
       }},
      {OpKind::max_pool2d, [](const Tensor& x) { return max_pool2d(x.reshape({2, 1, 4, 4}), 2); }},
      {OpKind::avg_pool2d, [](const Tensor& x) { return avg_pool2d(x.reshape({2, 1, 4, 4}), 2); }},
      {OpKind::scaled_dot_product_attention, [](const Tensor& x) {
         const Tensor h = x.reshape({2, 4, 4});
         return scaled_dot_product_attention(h, h, h);
       }},
      {OpKind::packed_qkv_attention, [](const Tensor& x) {
         return packed_qkv_attention(cat({x, x, x}, 1).reshape({2, 2, 24}), 2);
       }},
      {OpKind::embedding, [](const Tensor& x) { return embedding(x, {3, 0, 3}); }},
      {OpKind::masked_fill, [](const Tensor& x) { return masked_fill(x, causal_mask(8).slice(0, 0, 1), -1.0f); }},
  };
}

// One way to run each op of the policy table on a [4, 8] input x (positive: in every op's
// domain). The elementwise ops with a function of their own come from the op list.
std::map<OpKind, Fn> op_runners() {
  std::map<OpKind, Fn> runners = other_op_runners();
#define MIXPREC_UNARY_RUNNER(op, api, ...) \
  MIXPREC_OP_IF_##api(runners[OpKind::op] = [](const Tensor& x) { return mixprec::op(x); };)
#define MIXPREC_BINARY_RUNNER(op, api, ...) \
  MIXPREC_OP_IF_##api(runners[OpKind::op] = [](const Tensor& x) { return mixprec::op(x, x); };)
  MIXPREC_UNARY_OPS(MIXPREC_UNARY_RUNNER)
  MIXPREC_BINARY_OPS(MIXPREC_BINARY_RUNNER)
#undef MIXPREC_UNARY_RUNNER
#undef MIXPREC_BINARY_RUNNER
  return runners;
}

TEST(AutocastTable, EveryOpHasARowInEnumOrderAndARunner) {
  const auto runners = op_runners();
  for (std::size_t i = 0; i < kOpPolicyTable.size(); ++i) {
    const OpPolicy& row = kOpPolicyTable[i];
    EXPECT_EQ(static_cast<std::size_t>(row.op), i) << row.name;
    EXPECT_EQ(runners.count(row.op), 1u) << "no test runner for " << row.name;
  }
  const std::string table = format_policy_table();
  const std::size_t linear = table.find("\nlinear ");
  ASSERT_NE(linear, std::string::npos);
  EXPECT_EQ(table.find("lower_precision", linear), table.find_first_not_of(' ', linear + 7));
}

// docs/autocast.md prints the table `mixprec ops` prints: it may not fall behind the code.
TEST(AutocastTable, TheDocumentedTableIsTheCodesTable) {
  std::ifstream in(std::string(MIXPREC_TESTS_SOURCE_DIR) + "/../docs/autocast.md");
  ASSERT_TRUE(in) << "cannot read docs/autocast.md";
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(doc.find("```\n" + format_policy_table() + "\n"), std::string::npos)
      << "docs/autocast.md's table differs from format_policy_table(); paste `mixprec ops` into it";
}

// Under autocast every op produces the dtype the table documents, from f32 and from 16-bit
// inputs, in bf16 and f16 regions.
TEST(AutocastTable, EveryOpProducesItsDocumentedDtype) {
  for (DType lower : {DType::bf16, DType::f16}) {
    for (DType in : {DType::f32, DType::bf16, lower}) {
      const Tensor x = Tensor::uniform({4, 8}, 11, 0.5f, 2.0f, in);
      for (const auto& [op, run] : op_runners()) {
        SCOPED_TRACE(std::string(name(op)) + " in " + mixprec::name(in) + " region " + mixprec::name(lower));
        Autocast region(true, lower);
        EXPECT_EQ(run(x).dtype(), documented_output_dtype(op, in, lower));
      }
    }
  }
}

TEST(Autocast, OutsideARegionNothingIsCast) {
  EXPECT_FALSE(autocast_enabled());
  const Tensor x = Tensor::randn({2, 3}, 1), w = Tensor::randn({4, 3}, 2);
  EXPECT_EQ(linear(x, w).dtype(), DType::f32);
  EXPECT_EQ(softmax(x.to(DType::bf16)).dtype(), DType::bf16);
}

TEST(Autocast, NestsAndCanBeDisabledInside) {
  const Tensor x = Tensor::randn({2, 3}, 1), w = Tensor::randn({4, 3}, 2);
  Autocast outer;
  EXPECT_TRUE(autocast_enabled());
  EXPECT_EQ(linear(x, w).dtype(), DType::bf16);
  {
    Autocast off(false);
    EXPECT_FALSE(autocast_enabled());
    EXPECT_EQ(linear(x, w).dtype(), DType::f32);
    {
      Autocast inner(true, DType::f16);
      EXPECT_EQ(linear(x, w).dtype(), DType::f16);
    }
    EXPECT_FALSE(autocast_enabled());
  }
  EXPECT_EQ(autocast_dtype(), DType::bf16);
  EXPECT_EQ(linear(x, w).dtype(), DType::bf16);
}

TEST(Autocast, RejectsF32AsLowerDtype) {
  try {
    Autocast bad(true, DType::f32);
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("Autocast:", 0), 0u);
  }
}

TEST(Autocast, EachWeightIsCastOncePerRegion) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(8, 16, true, 1), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(16, 4, true, 2)});
  const Tensor x = Tensor::randn({5, 8}, 3);
  reset_cast_stats();
  {
    Autocast region;
    model->forward(x);  // 4 parameter casts + 1 activation cast (the input)
    EXPECT_EQ(cast_stats().casts, 5u);
    EXPECT_EQ(cast_stats().cache_hits, 0u);
    model->forward(x);  // parameters come from the cache; the input is cast again
    EXPECT_EQ(cast_stats().casts, 6u);
    EXPECT_EQ(cast_stats().cache_hits, 4u);
  }
  {
    // A new region starts with an empty cache, but the parameters' 16-bit copies are kept across
    // regions while the parameters do not change (runtime/weight_copies.h): only the input is cast.
    Autocast region;
    model->forward(x);
    EXPECT_EQ(cast_stats().casts, 7u);
    EXPECT_EQ(cast_stats().cache_hits, 8u);
  }
}

// promote: a bf16 operand meets an f32 one without a cast (the kernels widen as they load),
// with the values, dtype and gradients of casting it first, for every binary op of the table;
// div casts (its gradient squares the divisor, which must not happen in bf16).
TEST(Autocast, BinaryOpsPromoteWithoutACastAndAsACastWouldGive) {
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Binary> ops[] = {
      {"add", &mixprec::add}, {"sub", &mixprec::sub},         {"mul", &mixprec::mul},
      {"div", &mixprec::div}, {"maximum", &mixprec::maximum}, {"minimum", &mixprec::minimum}};
  for (const auto& [name, op] : ops) {
    const bool div = std::string(name) == "div";
    SCOPED_TRACE(name);
    const Tensor a0 = Tensor::uniform({4, 8}, 11, 0.5f, 2.0f);
    const Tensor b0 = Tensor::uniform({4, 8}, 12, 0.5f, 2.0f, DType::bf16);
    const Tensor c = Tensor::randn({4, 8}, 13);
    Tensor a1 = a0.detach(), b1 = b0.detach(), a2 = a0.detach(), b2 = b0.detach();
    for (Tensor* t : {&a1, &b1, &a2, &b2}) t->set_requires_grad(true);
    Tensor mixed, cast_first;
    {
      Autocast region;
      reset_cast_stats();
      mixed = op(a1, b1);
      EXPECT_EQ(cast_stats().casts, div ? 1u : 0u);
    }
    cast_first = op(a2, b2.to(DType::f32));
    ASSERT_EQ(mixed.dtype(), DType::f32);
    EXPECT_EQ(mixed.to_vector(), cast_first.to_vector());
    sum(mixed * c).backward();
    sum(cast_first * c).backward();
    EXPECT_EQ(a1.grad().to_vector(), a2.grad().to_vector());
    ASSERT_EQ(b1.grad().dtype(), DType::bf16);
    EXPECT_EQ(b1.grad().to_vector(), b2.grad().to_vector());
  }
}

TEST(Autocast, CacheIsInvalidatedWhenTheParameterChanges) {
  nn::Linear layer(4, 3, false, 1);
  optim::SGD opt(layer.parameters(), {.lr = 0.5f});
  const Tensor x = Tensor::randn({2, 4}, 2);
  Autocast region;
  const Tensor y1 = layer.forward(x);
  sum(y1).backward();
  opt.step();  // changes the weight in place (bumps its version)
  reset_cast_stats();
  const Tensor y2 = layer.forward(x);
  EXPECT_EQ(cast_stats().cache_hits, 0u);  // the stale bf16 copy was not reused
  EXPECT_NE(y1.to_vector(), y2.to_vector());
}

TEST(Autocast, GradientsOfFp32ParametersStayFp32) {
  nn::Linear layer(4, 3, true, 1);
  const Tensor x = Tensor::randn({2, 4}, 2);
  Tensor loss;
  {
    Autocast region;
    loss = cross_entropy(layer.forward(x), {0, 2});
  }
  EXPECT_EQ(loss.dtype(), DType::f32);
  loss.backward();
  EXPECT_EQ(layer.weight().grad().dtype(), DType::f32);
  EXPECT_EQ(layer.bias().grad().dtype(), DType::f32);
}

TEST(Autocast, CachedCastSurvivesTwoBackwardsInOneRegion) {
  nn::Linear layer(4, 3, false, 1);
  const Tensor x = Tensor::randn({2, 4}, 2);
  Autocast region;
  sum(layer.forward(x)).backward();
  const std::vector<float> g1 = layer.weight().grad().to_vector();
  sum(layer.forward(x)).backward();  // reuses the cached bf16 weight and its cast node
  const std::vector<float> g2 = layer.weight().grad().to_vector();
  for (std::size_t i = 0; i < g1.size(); ++i) EXPECT_FLOAT_EQ(g2[i], 2 * g1[i]);
}

TEST(Autocast, RunWithInputsCastRunsUserOpInF32) {
  Tensor w = Tensor::randn({3}, 1);
  w.set_requires_grad(true);
  Autocast region;
  const Tensor x = Tensor::randn({3}, 2, DType::bf16);
  DType seen = DType::bf16;
  bool autocast_inside = true;
  const Tensor y = run_with_inputs_cast(DType::f32, {x, w}, [&](const std::vector<Tensor>& in) {
    seen = in[0].dtype();
    autocast_inside = autocast_enabled();
    return sum(mul(in[0], in[1]));
  });
  EXPECT_EQ(seen, DType::f32);
  EXPECT_FALSE(autocast_inside);
  EXPECT_TRUE(autocast_enabled());
  y.backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  const std::vector<float> xv = x.to_vector(), g = w.grad().to_vector();
  for (std::size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(g[i], xv[i]);
}

}  // namespace
}  // namespace mixprec::runtime
