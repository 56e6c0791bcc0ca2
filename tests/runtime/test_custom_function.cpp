// Custom functions (runtime::apply): gradients of user-defined ops against double-precision
// finite differences; the backward runs under the forward's autocast state (custom_bwd);
// cast_inputs runs the forward in f32 inside a bf16 region (custom_fwd); the checks on what a
// user's backward returns; and custom ops inside a graph of ordinary ops, accumulating into
// parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "mixprec/runtime/function.h"
#include "mixprec/mixprec.h"

namespace mixprec::runtime {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::VecD;
using Ts = std::vector<Tensor>;

Tensor leaf(const std::vector<float>& v, const Shape& s, DType dtype = DType::f32) {
  Tensor t = Tensor::from_vector(v, s, dtype);
  t.set_requires_grad(true);
  return t;
}

// swish(x) = x * sigmoid(x), with the derivative written by hand: s + x * (s - s^2).
CustomFunction swish() {
  return {"swish",
          [](FunctionContext& ctx, const Ts& in) {
            ctx.save_for_backward({in[0]});
            return in[0] * sigmoid(in[0]);
          },
          [](FunctionContext& ctx, const Tensor& dy) -> Ts {
            const Tensor& x = ctx.saved_tensors()[0];
            const Tensor s = sigmoid(x);
            return {dy * (s + x * (s - s * s))};
          }};
}

// scale * x^2 * w with scale a saved scalar; two inputs of one shape.
CustomFunction scaled_square(double scale) {
  return {"scaled_square",
          [scale](FunctionContext& ctx, const Ts& in) {
            ctx.save_for_backward({in[0], in[1]});
            ctx.save_scalar("scale", scale);
            return in[0] * in[0] * in[1] * static_cast<float>(scale);
          },
          [](FunctionContext& ctx, const Tensor& dy) -> Ts {
            const Tensor& x = ctx.saved_tensors()[0];
            const Tensor& w = ctx.saved_tensors()[1];
            const auto c = static_cast<float>(ctx.scalar("scale"));
            return {dy * x * w * (2.0f * c), dy * x * x * c};
          }};
}

// An identity whose backward is given by the test (to return wrong things on purpose).
CustomFunction identity_with(std::function<Ts(FunctionContext&, const Tensor&)> backward) {
  return {"my_identity", [](FunctionContext&, const Ts& in) { return in[0]; }, std::move(backward)};
}

template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception thrown; expected one mentioning " << parts.front();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(msg.find(part), std::string::npos) << "message lacks \"" << part << "\": " << msg;
    }
  }
}

TEST(CustomFunction, GradientsMatchFiniteDifferences) {
  gradcheck([](const Ts& x) { return apply(swish(), {x[0]}); },
            [](const std::vector<VecD>& x) {
              VecD y(x[0].size());
              for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] / (1.0 + std::exp(-x[0][i]));
              return y;
            },
            {{{3, 5}, random_values(15, 1, -4, 4)}});
  gradcheck(
      [](const Ts& x) {
        return apply(scaled_square(0.75), {x[0], x[1]});
      },
      [](const std::vector<VecD>& x) {
        VecD y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = 0.75 * x[0][i] * x[0][i] * x[1][i];
        return y;
      },
      {{{2, 4}, random_values(8, 2)}, {{2, 4}, random_values(8, 3)}});
}

// custom_bwd: Tensor::backward() usually runs after the Autocast region has ended, yet the
// backward sees the region of the forward; and a region around backward does not leak in.
TEST(CustomFunction, BackwardRunsUnderTheForwardsAutocastState) {
  bool enabled = false;
  DType dtype = DType::f32;
  const CustomFunction probe = identity_with([&](FunctionContext&, const Tensor& dy) -> Ts {
    enabled = runtime::autocast_enabled();
    dtype = runtime::autocast_dtype();
    return {dy};
  });
  Tensor x = leaf({1, 2}, {2});
  Tensor y;
  {
    runtime::Autocast region(true, DType::f16);
    y = apply(probe, {x});
  }
  ASSERT_FALSE(runtime::autocast_enabled());
  sum(y).backward();
  EXPECT_TRUE(enabled);
  EXPECT_EQ(dtype, DType::f16);
  EXPECT_FALSE(runtime::autocast_enabled()) << "the forward's state is restored after backward";

  const Tensor plain = apply(probe, {x});
  {
    runtime::Autocast region(true, DType::bf16);
    sum(plain).backward();
    EXPECT_TRUE(runtime::autocast_enabled());
  }
  EXPECT_FALSE(enabled);
}

// custom_fwd(cast_inputs=f32): inside a bf16 region the forward sees f32 inputs with autocast
// off, the backward too; gradients come back in the callers' dtypes. Outside a region nothing
// is cast.
TEST(CustomFunction, CastInputsRunsTheForwardInOnePrecision) {
  std::vector<DType> seen;
  bool forward_autocast = true, backward_autocast = true;
  CustomFunction f{"f32_add",
                   [&](FunctionContext&, const Ts& in) {
                     seen = {in[0].dtype(), in[1].dtype()};
                     forward_autocast = runtime::autocast_enabled();
                     return in[0] + in[1];
                   },
                   [&](FunctionContext&, const Tensor& dy) -> Ts {
                     EXPECT_EQ(dy.dtype(), DType::f32);
                     backward_autocast = runtime::autocast_enabled();
                     return {dy, dy};
                   },
                   DType::f32};
  Tensor x = leaf({1, 2, 3}, {3}, DType::bf16);
  Tensor w = leaf({4, 5, 6}, {3});
  Tensor y;
  {
    runtime::Autocast region;
    y = apply(f, {x, w});
    EXPECT_TRUE(runtime::autocast_enabled());
  }
  EXPECT_EQ(seen, (std::vector<DType>{DType::f32, DType::f32}));
  EXPECT_FALSE(forward_autocast);
  EXPECT_EQ(y.dtype(), DType::f32);
  sum(y).backward();
  EXPECT_FALSE(backward_autocast);
  ASSERT_TRUE(x.grad().defined() && w.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::bf16);  // back through the cast to the bf16 leaf
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{1, 1, 1}));

  (void)apply(f, {x, w});
  EXPECT_EQ(seen, (std::vector<DType>{DType::bf16, DType::f32}));

  f.cast_inputs = DType::f8e4m3;
  expect_error<DTypeError>([&] { apply(f, {x, w}); }, {"f32_add"});
}

TEST(CustomFunction, BackwardResultsAreChecked) {
  Tensor x = leaf({1, 2, 3}, {3}, DType::bf16);
  expect_error<ValueError>(
      [&] {
        sum(apply(identity_with([](FunctionContext&, const Tensor& dy) -> Ts { return {dy, dy}; }), {x})).backward();
      },
      {"my_identity", "2 gradient(s)", "1 input(s)"});
  expect_error<ShapeError>(
      [&] {
        sum(apply(identity_with([](FunctionContext&, const Tensor&) -> Ts { return {Tensor::ones({2})}; }), {x}))
            .backward();
      },
      {"my_identity", "[2]", "input 0 of shape [3]"});
  // A gradient in another dtype is converted to the input's; an undefined one sends nothing.
  sum(apply(identity_with([](FunctionContext&, const Tensor& dy) -> Ts { return {dy.to(DType::f32) * 2.0f}; }), {x}))
      .backward();
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2, 2, 2}));
  Tensor z = leaf({1}, {1});
  sum(apply(identity_with([](FunctionContext&, const Tensor&) -> Ts { return {Tensor()}; }), {z})).backward();
  EXPECT_FALSE(z.grad().defined());

  // A gradient for an input given as an undefined tensor.
  const CustomFunction optional_bias{"biased", [](FunctionContext&, const Ts& in) { return in[0] * 1.0f; },
                                     [](FunctionContext&, const Tensor& dy) -> Ts {
                                       return {dy, dy};
                                     }};
  expect_error<ValueError>(
      [&] {
        sum(apply(optional_bias, {x, Tensor()})).backward();
      },
      {"biased", "input 1", "undefined"});

  // Definitions that cannot work, caught at the call.
  expect_error<ValueError>([&] { apply(CustomFunction{"", swish().forward, swish().backward, {}}, {x}); }, {"no name"});
  expect_error<ValueError>(
      [&] {
        apply(CustomFunction{"half_done", swish().forward, nullptr, {}}, {x});
      },
      {"half_done", "no backward"});
  expect_error<ValueError>(
      [&] {
        apply(CustomFunction{"void_op", [](FunctionContext&, const Ts&) { return Tensor(); }, swish().backward, {}},
              {x});
      },
      {"void_op", "undefined tensor"});
}

TEST(CustomFunction, SavedTensorsAreGuarded) {
  Tensor x = leaf({0.5f, -1.0f}, {2});
  Tensor y = apply(swish(), {x});
  x.bump_version();  // what an optimizer step does to a parameter
  expect_error<StateError>([&] { sum(y).backward(); }, {"swish", "saved tensor 0", "modified in place"});

  FunctionContext ctx("lookup", {});
  ctx.save_scalar("alpha", 0.5);
  EXPECT_EQ(ctx.scalar("alpha"), 0.5);
  expect_error<ValueError>([&] { ctx.scalar("beta"); }, {"lookup", "'beta'", "save_scalar"});

  Tensor x2 = leaf({0.5f, -1.0f}, {2});
  const Tensor loss = sum(apply(scaled_square(2.0), {x2, x2}));
  loss.backward();
  expect_error<StateError>([&] { loss.backward(); }, {"retain_graph"});
}

TEST(CustomFunction, RecordsANodeOnlyWhenAGradientIsNeeded) {
  std::vector<bool> needs;
  const CustomFunction f{"needs",
                         [&](FunctionContext& ctx, const Ts& in) {
                           needs = ctx.needs_input_grad();
                           EXPECT_FALSE(grad_enabled()) << "forward must not be taped";
                           return in[0];
                         },
                         [](FunctionContext&, const Tensor& dy) -> Ts {
                           return {dy, Tensor()};
                         }};
  Tensor x = leaf({1, 2}, {2});
  const Tensor c = Tensor::from_vector({3, 4}, {2});
  const Tensor y = apply(f, {x, c});
  EXPECT_EQ(needs, (std::vector<bool>{true, false}));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_same(x)) << "an identity forward must not re-link its input";
  EXPECT_TRUE(x.is_leaf());
  EXPECT_STREQ(y.grad_fn()->name(), "needs");
  EXPECT_FALSE(apply(f, {c, c}).requires_grad());
  {
    NoGradGuard off;
    EXPECT_FALSE(apply(f, {x, c}).requires_grad());
    EXPECT_EQ(needs, (std::vector<bool>{false, false}));
  }
}

// In a graph of ordinary ops (a matmul before, a mean after), the custom op's gradients reach
// an f32 parameter and accumulate across two backward passes, as the built-in ops' would.
TEST(CustomFunction, WorksInAGraphAndAccumulatesIntoParameters) {
  const Tensor x = Tensor::uniform({4, 3}, 5, -1, 1);
  Tensor w = Tensor::uniform({3, 2}, 6, -1, 1);
  w.set_requires_grad(true);
  Tensor w_ref = w.detach().clone();
  w_ref.set_requires_grad(true);
  for (int pass = 0; pass < 2; ++pass) {
    mean(apply(swish(), {matmul(x, w)}) * 3.0f).backward();
    const Tensor h = matmul(x, w_ref);
    mean(h * sigmoid(h) * 3.0f).backward();
  }
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  const std::vector<float> g = w.grad().to_vector(), ref = w_ref.grad().to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], ref[i], 1e-5f) << i;
}

}  // namespace
}  // namespace mixprec::runtime
