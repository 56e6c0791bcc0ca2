// Modules with several inputs, MultiHeadAttention and the pre-LN TransformerBlock: against the
// computation written out with primitive ops, causality, masks, dropout replay, gradients to
// every parameter, autocast.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "mixprec/runtime/autocast.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"
#include "mixprec/nn/fp8_layers.h"
#include "mixprec/nn/transformer.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"

namespace mixprec::nn {
namespace {

Tensor param(const Module& m, const std::string& path) {
  for (const auto& [name, t] : m.named_parameters()) {
    if (name == path) return t;
  }
  ADD_FAILURE() << "no parameter " << path;
  return Tensor();
}

// Self-attention written out: projections, per-head softmax(q k^T / sqrt(dh) + causal), output.
std::vector<float> by_hand(const MultiHeadAttention& mha, const Tensor& x, bool causal) {
  const std::int64_t b = x.size(0), t = x.size(1), d = x.size(2), h = mha.heads(), dh = d / h;
  // q, k and v are rows [0, d), [d, 2d) and [2d, 3d) of the fused projection.
  const Tensor w = param(mha, "qkv_proj.weight"), bias = param(mha, "qkv_proj.bias");
  auto proj = [&](std::int64_t part) {
    return linear(x, w.slice(0, part * d, (part + 1) * d), bias.slice(0, part * d, (part + 1) * d))
        .to_vector();
  };
  const std::vector<float> q = proj(0), k = proj(1), v = proj(2);
  std::vector<float> att(static_cast<std::size_t>(b * t * d));
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t hi = 0; hi < h; ++hi)
      for (std::int64_t i = 0; i < t; ++i) {
        std::vector<double> s(static_cast<std::size_t>(t));
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < t; ++j) {
          double dot = 0;
          for (std::int64_t c = 0; c < dh; ++c) {
            dot += static_cast<double>(q[static_cast<std::size_t>((bi * t + i) * d + hi * dh + c)]) *
                   static_cast<double>(k[static_cast<std::size_t>((bi * t + j) * d + hi * dh + c)]);
          }
          s[static_cast<std::size_t>(j)] = causal && j > i ? -INFINITY : dot / std::sqrt(static_cast<double>(dh));
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (std::int64_t c = 0; c < dh; ++c) {
          double acc = 0;
          for (std::int64_t j = 0; j < t; ++j) {
            acc += s[static_cast<std::size_t>(j)] / sum *
                   static_cast<double>(v[static_cast<std::size_t>((bi * t + j) * d + hi * dh + c)]);
          }
          att[static_cast<std::size_t>((bi * t + i) * d + hi * dh + c)] = static_cast<float>(acc);
        }
      }
  Tensor a = Tensor::empty({b, t, d});
  std::copy(att.begin(), att.end(), static_cast<float*>(a.data_ptr()));
  return linear(a, param(mha, "out_proj.weight"), param(mha, "out_proj.bias")).to_vector();
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << i;
}

TEST(MultiHeadAttention, MatchesTheComputationWrittenOut) {
  for (bool causal : {false, true}) {
    MultiHeadAttention mha(12, 3, causal, 0.0f, true, 5);
    const Tensor x = Tensor::randn({2, 7, 12}, 1);
    expect_near(mha(x).to_vector(), by_hand(mha, x, causal), 2e-5);
  }
}

TEST(MultiHeadAttention, CausalOutputsIgnoreLaterPositions) {
  MultiHeadAttention mha(8, 2, true, 0.0f, true, 1);
  Tensor x = Tensor::randn({1, 6, 8}, 2);
  const std::vector<float> before = mha(x).to_vector();
  Tensor changed = Tensor::randn({1, 6, 8}, 2);
  static_cast<float*>(changed.data_ptr())[5 * 8 + 3] += 10.0f;  // the last position only
  const std::vector<float> after = mha(changed).to_vector();
  for (std::size_t i = 0; i < 5 * 8; ++i) EXPECT_EQ(after[i], before[i]) << i;
  bool last_changed = false;
  for (std::size_t i = 5 * 8; i < 6 * 8; ++i) last_changed |= after[i] != before[i];
  EXPECT_TRUE(last_changed);
}

TEST(MultiHeadAttention, CrossAttentionWithAMaskAndBadInputs) {
  MultiHeadAttention mha(8, 2, false, 0.0f, true, 3);
  const Tensor q = Tensor::randn({2, 3, 8}, 4), kv = Tensor::randn({2, 5, 8}, 5);
  EXPECT_EQ(mha({q, kv, kv}).shape(), (Shape{2, 3, 8}));
  // A mask hiding keys 3 and 4 equals attending to keys 0-2 only.
  Tensor mask = Tensor::zeros({1, 1, 1, 5});
  static_cast<float*>(mask.data_ptr())[3] = -INFINITY;
  static_cast<float*>(mask.data_ptr())[4] = -INFINITY;
  const Tensor first3 = kv.slice(1, 0, 3).contiguous();
  expect_near(mha({q, kv, kv, mask}).to_vector(), mha({q, first3, first3}).to_vector(), 1e-6);
  EXPECT_THROW(mha({q, kv}), ValueError);
  EXPECT_THROW(mha({q, kv, Tensor::randn({2, 5, 6}, 6)}), ShapeError);
  EXPECT_THROW(MultiHeadAttention(10, 3), ValueError);
  // A single-input module refuses several inputs with its name.
  Linear lin(8, 8);
  try {
    lin({q, q});
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Linear"), std::string::npos) << e.what();
  }
}

TEST(TransformerBlock, GradientsReachEveryParameterAndAutocastAgrees) {
  TransformerBlock block(16, 4, true, 0.0f, 7);
  const Tensor x = Tensor::randn({2, 5, 16}, 8);
  const Tensor y = block(x);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 16}));
  sum(mul(y, y)).backward();
  for (const auto& [name, p] : block.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    double norm = 0;
    for (float g : p.grad().to(DType::f32).to_vector()) norm += static_cast<double>(g) * g;
    EXPECT_TRUE(std::isfinite(norm) && norm > 0) << name;
  }
  // Under bf16 autocast: the same function to bf16 precision (attention keeps fp32 softmax).
  Tensor low;
  {
    runtime::Autocast region(true, DType::bf16);
    low = block(x);
  }
  EXPECT_EQ(low.dtype(), DType::f32);  // the residual stream adds in the widest dtype
  const std::vector<float> a = y.to_vector(), b = low.to_vector();
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(a[i])));
  }
  EXPECT_LT(err, 0.05 * mag);
}

/// One training forward and backward of the block: its output, every parameter's gradient, and
/// whether the MLP ran as one op (the cpu backend's matmul_aux logs a verbose line).
struct BlockRun {
  std::vector<float> y;
  std::map<std::string, std::vector<float>> grads;
  bool fused;
};
BlockRun run_block(TransformerBlock& block, const Tensor& x) {
  for (const auto& [name, p] : block.named_parameters()) p.impl().grad.reset();
  set_verbose(true);
  ::testing::internal::CaptureStderr();
  const Tensor y = block(x);
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_verbose(false);
  sum(mul(y, y)).backward();
  BlockRun r{y.to_vector(), {}, log.find("matmul_aux") != std::string::npos};
  for (const auto& [name, p] : block.named_parameters()) r.grads[name] = p.grad().to_vector();
  return r;
}

TEST(TransformerBlock, TheMlpRunsAsOneOpOnlyWhenNothingWatchesTheSameNumbersEitherWay) {
  TransformerBlock block(16, 4, true, 0.0f, 7);
  const Tensor x = Tensor::randn({2, 5, 16}, 8);
  const BlockRun fused = run_block(block, x);
  EXPECT_TRUE(fused.fused);
  // A compute-dtype override (f32: the same numbers) on any of the three modules runs them
  // apart, and the numbers are the fused op's.
  for (const char* child : {"fc", "act", "proj"}) {
    SCOPED_TRACE(child);
    TransformerBlock apart(16, 4, true, 0.0f, 7);
    for (const auto& [name, m] : apart.children()) {
      if (name == child) m->set_compute_dtype(DType::f32);
    }
    const BlockRun r = run_block(apart, x);
    EXPECT_FALSE(r.fused);
    EXPECT_EQ(r.y, fused.y);
    EXPECT_EQ(r.grads, fused.grads);
  }
  // The parameters (and so state dicts and checkpoints) are the modules' as before.
  std::vector<std::string> names;
  for (const auto& [name, p] : block.named_parameters()) names.push_back(name);
  for (const char* n : {"fc.weight", "fc.bias", "proj.weight", "proj.bias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(TransformerBlock, AnFp8LinearRunsTheMlpApart) {
  // The default fp8 policy (every Linear but the first and the last) puts out_proj and fc in
  // fp8: the MLP runs as three ops and trains; with only qkv_proj in fp8 it fuses again.
  TransformerBlock block(16, 4, true, 0.0f, 7);
  const Tensor x = Tensor::randn({2, 5, 16}, 8);
  Fp8Layers layers(block, runtime::Fp8Recipe{});
  {
    Fp8Scope scope(layers);
    const BlockRun r = run_block(block, x);
    EXPECT_FALSE(r.fused);
    for (const auto& [name, g] : r.grads) {
      for (float v : g) ASSERT_TRUE(std::isfinite(v)) << name;
    }
  }
  Fp8Layers qkv_only(block, runtime::Fp8Recipe{},
                     {{"attn.qkv_proj", true}, {"attn.out_proj", false}, {"fc", false}, {"proj", false}},
                     "test policy");
  Fp8Scope scope(qkv_only);
  EXPECT_TRUE(run_block(block, x).fused);
}

TEST(MultiHeadAttention, DropoutMasksReplayFromTheCallCounter) {
  MultiHeadAttention mha(8, 2, true, 0.3f, true, 9);
  const Tensor x = Tensor::randn({1, 6, 8}, 10);
  mha.train();
  const std::vector<float> first = mha(x).to_vector();
  const std::vector<float> second = mha(x).to_vector();
  EXPECT_NE(first, second);  // a new mask per call
  mha.set_calls(0);
  EXPECT_EQ(mha(x).to_vector(), first);  // the same count, the same mask
  mha.eval();
  EXPECT_EQ(mha.calls(), 1u);
  const std::vector<float> eval1 = mha(x).to_vector();
  EXPECT_EQ(mha(x).to_vector(), eval1);  // no dropout in evaluation
  EXPECT_EQ(mha.calls(), 1u);
}

}  // namespace
}  // namespace mixprec::nn
