// runtime::AttentionPrecision: the knob itself (default, guards, parsing) and what the attention op
// does with it: under bf16/f16 with `default` it asks the kernels for the rounded-P spec
// (AttentionDesc::round_probs), with `highest` it keeps P and dS f32, and its backward keeps the
// forward's choice. Each is checked bit for bit against the active backend's kernels called with
// round_probs set one way or the other (the two differ on these inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using runtime::AttentionPrecision;
using runtime::AttentionPrecisionGuard;

constexpr std::int64_t kB = 2, kT = 40, kD = 16;

struct Grads {
  std::vector<float> out, dq, dk, dv;
};

Tensor input(std::uint64_t seed, DType t) { return Tensor::randn({kB, kT, kD}, seed).to(t); }

/// The op on fixed inputs of dtype t (causal), its output and gradients for dout = `dout`.
/// `backward_precision` is the precision in force when backward() runs.
Grads through_op(DType t, AttentionPrecision backward_precision) {
  Tensor q = input(1, t), k = input(2, t), v = input(3, t);
  for (Tensor* x : {&q, &k, &v}) x->set_requires_grad(true);
  const Tensor y = scaled_dot_product_attention(q, k, v, {}, 0.0f, true);
  AttentionPrecisionGuard during_backward(backward_precision);
  y.backward(input(4, t));
  return {y.to(DType::f32).to_vector(), q.grad().to(DType::f32).to_vector(),
          k.grad().to(DType::f32).to_vector(), v.grad().to(DType::f32).to_vector()};
}

/// The same computation by the kernels directly, with round_probs as given.
Grads through_kernels(DType t, bool round_probs) {
  const Tensor q = input(1, t), k = input(2, t), v = input(3, t), dout = input(4, t);
  kernels::AttentionDesc d;
  d.bh = kB; d.tq = kT; d.tk = kT; d.d = kD; d.dv = kD;
  d.dtype = t;
  d.scale = 1.0f / std::sqrt(static_cast<float>(kD));
  d.causal = true;
  d.round_probs = round_probs;
  Tensor out = Tensor::empty({kB, kT, kD}, t), lse = Tensor::empty({kB, kT});
  kernels::attention_forward(d, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                             static_cast<float*>(lse.data_ptr()));
  Tensor dq = Tensor::empty({kB, kT, kD}, t), dk = Tensor::empty({kB, kT, kD}, t),
         dv = Tensor::empty({kB, kT, kD}, t);
  kernels::attention_backward(d, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                              static_cast<const float*>(lse.data_ptr()), dout.data_ptr(),
                              dq.data_ptr(), dk.data_ptr(), dv.data_ptr());
  return {out.to(DType::f32).to_vector(), dq.to(DType::f32).to_vector(),
          dk.to(DType::f32).to_vector(), dv.to(DType::f32).to_vector()};
}

void expect_same(const Grads& got, const Grads& want, const char* where) {
  EXPECT_EQ(got.out, want.out) << where << " out";
  EXPECT_EQ(got.dq, want.dq) << where << " dq";
  EXPECT_EQ(got.dk, want.dk) << where << " dk";
  EXPECT_EQ(got.dv, want.dv) << where << " dv";
}

TEST(AttentionPrecision, DefaultIsDefaultAndGuardsNest) {
  EXPECT_EQ(runtime::attention_precision(), AttentionPrecision::default_);
  {
    AttentionPrecisionGuard highest(AttentionPrecision::highest);
    EXPECT_EQ(runtime::attention_precision(), AttentionPrecision::highest);
    {
      AttentionPrecisionGuard def(AttentionPrecision::default_);
      EXPECT_EQ(runtime::attention_precision(), AttentionPrecision::default_);
    }
    EXPECT_EQ(runtime::attention_precision(), AttentionPrecision::highest);
  }
  EXPECT_EQ(runtime::attention_precision(), AttentionPrecision::default_);
  runtime::set_attention_precision(AttentionPrecision::highest);
  EXPECT_EQ(runtime::attention_precision(), AttentionPrecision::highest);
  runtime::set_attention_precision(AttentionPrecision::default_);
  EXPECT_EQ(runtime::parse_attention_precision("highest"), AttentionPrecision::highest);
  EXPECT_EQ(runtime::parse_attention_precision("default"), AttentionPrecision::default_);
  EXPECT_STREQ(runtime::name(AttentionPrecision::highest), "highest");
  EXPECT_STREQ(runtime::name(AttentionPrecision::default_), "default");
  EXPECT_THROW(runtime::parse_attention_precision("high"), ValueError);
}

TEST(AttentionPrecision, SixteenBitDefaultRoundsPAndHighestKeepsF32) {
  for (DType t : {DType::bf16, DType::f16}) {
    const Grads rounded = through_kernels(t, true), plain = through_kernels(t, false);
    // The inputs are such that the rounding shows (else the comparisons below prove nothing).
    ASSERT_NE(rounded.out, plain.out) << name(t);
    ASSERT_NE(rounded.dq, plain.dq) << name(t);
    expect_same(through_op(t, AttentionPrecision::default_), rounded, name(t));
    {
      AttentionPrecisionGuard highest(AttentionPrecision::highest);
      expect_same(through_op(t, AttentionPrecision::highest), plain, name(t));
    }
  }
}

TEST(AttentionPrecision, TheBackwardKeepsTheForwardsChoice) {
  // A node recorded under `default` differentiates with rounded P and dS even if the knob
  // changed before backward(), and the other way round.
  const DType t = DType::bf16;
  expect_same(through_op(t, AttentionPrecision::highest), through_kernels(t, true),
              "forward default, backward under highest");
  AttentionPrecisionGuard highest(AttentionPrecision::highest);
  expect_same(through_op(t, AttentionPrecision::default_), through_kernels(t, false),
              "forward highest, backward under default");
}

TEST(AttentionPrecision, F32IsF32UnderEitherSetting) {
  const Grads def = through_op(DType::f32, AttentionPrecision::default_);
  expect_same(def, through_kernels(DType::f32, false), "f32 default");
  AttentionPrecisionGuard highest(AttentionPrecision::highest);
  expect_same(through_op(DType::f32, AttentionPrecision::highest), def, "f32 highest");
}

TEST(AttentionPrecision, AutocastBf16RoundsUnlessHighest) {
  // Through autocast (f32 tensors cast to bf16 by the op's policy), as a model runs it.
  const Tensor q = Tensor::randn({kB, kT, kD}, 1), k = Tensor::randn({kB, kT, kD}, 2),
               v = Tensor::randn({kB, kT, kD}, 3);
  runtime::Autocast region(true, DType::bf16);
  const std::vector<float> def =
      scaled_dot_product_attention(q, k, v, {}, 0.0f, true).to(DType::f32).to_vector();
  EXPECT_EQ(def, through_kernels(DType::bf16, true).out);
  AttentionPrecisionGuard highest(AttentionPrecision::highest);
  const std::vector<float> hi =
      scaled_dot_product_attention(q, k, v, {}, 0.0f, true).to(DType::f32).to_vector();
  EXPECT_EQ(hi, through_kernels(DType::bf16, false).out);
}

}  // namespace
}  // namespace mixprec
