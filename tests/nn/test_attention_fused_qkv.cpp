// MultiHeadAttention's fused q|k|v projection: the same output and gradients as three separate
// Linears holding its rows (f32 and bf16 autocast, causal or not, on ref, cpu and devsim),
// cross-attention through the rows of the one weight, and state dicts of the older layout
// (q_proj, k_proj, v_proj) loading into it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backend_scope.h"
#include "mixprec/mixprec.h"

namespace mixprec::nn {
namespace {

using testing::BackendScope;

Tensor param(const Module& m, const std::string& path) {
  for (const auto& [name, t] : m.named_parameters()) {
    if (name == path) return t;
  }
  ADD_FAILURE() << "no parameter " << path;
  return Tensor();
}

/// A leaf copy of rows [first, first + count) of t.
Tensor leaf_rows(const Tensor& t, std::int64_t first, std::int64_t count) {
  Tensor r = t.detach().slice(0, first, first + count).contiguous().clone();
  r.set_requires_grad(true);
  return r;
}

struct Grads {
  std::vector<float> y, dx, dw_qkv, db_qkv, dw_out, db_out;
};

/// MultiHeadAttention as it was before the fusion: three Linears (here: leaf tensors holding
/// the rows of mha's qkv_proj), attention on their heads, the output projection.
Grads separate(const MultiHeadAttention& mha, const Tensor& x_values, const Tensor& dy, bool causal,
               bool autocast) {
  const std::int64_t b = x_values.size(0), t = x_values.size(1), d = x_values.size(2), h = mha.heads();
  const Tensor w = param(mha, "qkv_proj.weight"), bias = param(mha, "qkv_proj.bias");
  Tensor wq = leaf_rows(w, 0, d), wk = leaf_rows(w, d, d), wv = leaf_rows(w, 2 * d, d);
  Tensor bq = leaf_rows(bias, 0, d), bk = leaf_rows(bias, d, d), bv = leaf_rows(bias, 2 * d, d);
  Tensor wo = leaf_rows(param(mha, "out_proj.weight"), 0, d), bo = leaf_rows(param(mha, "out_proj.bias"), 0, d);
  Tensor x = x_values.clone();
  x.set_requires_grad(true);
  Tensor y;
  {
    runtime::Autocast region(autocast, DType::bf16);
    const auto heads = [&](const Tensor& z) { return z.reshape({b, t, h, d / h}).permute({0, 2, 1, 3}); };
    const Tensor a = scaled_dot_product_attention(heads(linear(x, wq, bq)), heads(linear(x, wk, bk)),
                                                  heads(linear(x, wv, bv)), {}, 0.0f, causal);
    y = linear(a.permute({0, 2, 1, 3}).contiguous().reshape({b, t, d}), wo, bo);
  }
  y.backward(dy.to(y.dtype()));
  const auto rows = [](const std::vector<Tensor>& parts) { return cat(parts, 0).to_vector(); };
  return {y.to(DType::f32).to_vector(), x.grad().to_vector(),
          rows({wq.grad(), wk.grad(), wv.grad()}), rows({bq.grad(), bk.grad(), bv.grad()}),
          wo.grad().to_vector(), bo.grad().to_vector()};
}

Grads fused(MultiHeadAttention& mha, const Tensor& x_values, const Tensor& dy, bool autocast) {
  for (const Tensor& p : mha.parameters()) p.set_grad(Tensor());
  Tensor x = x_values.clone();
  x.set_requires_grad(true);
  Tensor y;
  {
    runtime::Autocast region(autocast, DType::bf16);
    y = mha(x);
  }
  y.backward(dy.to(y.dtype()));
  return {y.to(DType::f32).to_vector(),
          x.grad().to_vector(),
          param(mha, "qkv_proj.weight").grad().to_vector(),
          param(mha, "qkv_proj.bias").grad().to_vector(),
          param(mha, "out_proj.weight").grad().to_vector(),
          param(mha, "out_proj.bias").grad().to_vector()};
}

/// Equal bit for bit when exact, else within `rel` of the largest |want|.
void expect_same(const std::vector<float>& got, const std::vector<float>& want, bool exact,
                 double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (exact) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  double scale = 0.0;
  for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * scale) << what << " element " << i;
  }
}

TEST(FusedQkv, EqualsThreeSeparateLinearsForwardAndBackward) {
  // Each output of the fused GEMM is the dot product the separate GEMM computes for it, and
  // attention reads q, k, v in place computing the same sums (the packed op's own test), so
  // the output, the weight and bias gradients (sums over tokens of one gradient column) are
  // the same bits wherever a GEMM sums an output's terms in a fixed order: the reference and
  // devsim, which runs it. dx differs in rounding: one sum over 3d terms where the separate
  // layers add three sums of d. oneDNN (cpu) may block a [., 3d] GEMM unlike a [., d] one, so
  // there everything agrees to rounding.
  const std::int64_t d = 24, heads = 3;
  for (const char* backend : {"ref", "cpu", "devsim"}) {
    BackendScope scope(backend);
    const Tensor x = Tensor::randn({2, 9, d}, 11), dy = Tensor::randn({2, 9, d}, 12);
    for (const bool autocast : {false, true}) {
      for (const bool causal : {false, true}) {
        SCOPED_TRACE(std::string(backend) + (autocast ? " bf16 autocast" : " f32") +
                     (causal ? " causal" : ""));
        MultiHeadAttention mha(d, heads, causal, 0.0f, true, 3);
        const Grads want = separate(mha, x, dy, causal, autocast);
        const Grads got = fused(mha, x, dy, autocast);
        const bool exact = std::string(backend) != "cpu";
        // bf16: a 16-bit GEMM output may round the other way once its f32 sum differs in order.
        const double rel = autocast ? 4.0 * 0x1p-8 : 64.0 * 0x1p-24;
        expect_same(got.y, want.y, exact, rel, "y");
        expect_same(got.dx, want.dx, false, rel, "dx");
        expect_same(got.dw_qkv, want.dw_qkv, exact, rel, "d qkv_proj.weight");
        expect_same(got.db_qkv, want.db_qkv, exact, rel, "d qkv_proj.bias");
        expect_same(got.dw_out, want.dw_out, exact, rel, "d out_proj.weight");
        expect_same(got.db_out, want.db_out, exact, rel, "d out_proj.bias");
      }
    }
  }
}

TEST(FusedQkv, CrossAttentionRunsEachInputThroughItsRowsOfTheOneWeight) {
  BackendScope scope("ref");  // exact sums: the two paths compare bit for bit
  const std::int64_t d = 16;
  MultiHeadAttention mha(d, 2, false, 0.0f, true, 4);
  const Tensor x = Tensor::randn({2, 5, d}, 13);
  // The same values in a different tensor take the cross-attention path: same result.
  EXPECT_EQ(mha({x, x.clone(), x.clone()}).to_vector(), mha(x).to_vector());

  // Query and key/value of other lengths: q from rows [0, d), k from [d, 2d), v from [2d, 3d).
  const Tensor q = Tensor::randn({2, 3, d}, 14), kv = Tensor::randn({2, 6, d}, 15);
  const Tensor w = param(mha, "qkv_proj.weight"), b = param(mha, "qkv_proj.bias");
  const auto proj = [&](const Tensor& in, std::int64_t part) {
    return linear(in, w.slice(0, part * d, (part + 1) * d), b.slice(0, part * d, (part + 1) * d))
        .reshape({2, in.size(1), 2, d / 2})
        .permute({0, 2, 1, 3});
  };
  const Tensor a = scaled_dot_product_attention(proj(q, 0), proj(kv, 1), proj(kv, 2));
  const Tensor want = linear(a.permute({0, 2, 1, 3}).contiguous().reshape({2, 3, d}),
                             param(mha, "out_proj.weight"), param(mha, "out_proj.bias"));
  const Tensor y = mha({q, kv, kv});
  EXPECT_EQ(y.to_vector(), want.to_vector());
  // Gradients reach every row of the one weight: q's rows from the query, k's and v's from kv.
  for (const Tensor& p : mha.parameters()) p.set_grad(Tensor());
  sum(mul(y, y)).backward();
  const std::vector<float> g = w.grad().to_vector();
  for (std::int64_t part = 0; part < 3; ++part) {
    double norm = 0.0;
    for (std::int64_t i = part * d * d; i < (part + 1) * d * d; ++i) norm += std::fabs(g[static_cast<std::size_t>(i)]);
    EXPECT_GT(norm, 0.0) << "rows of part " << part;
  }
  // Out-of-range rows are refused.
  Linear lin(4, 6);
  EXPECT_THROW(lin.forward_rows(Tensor::randn({1, 4}, 1), 4, 3), ValueError);
  EXPECT_THROW(lin.forward_rows(Tensor::randn({1, 4}, 1), -1, 2), ValueError);
}

/// m's state as the older layout named it: every "<prefix>qkv_proj.<suffix>" split into
/// "<prefix>q_proj.<suffix>", k_proj and v_proj (rows [0, d), [d, 2d), [2d, 3d)).
std::map<std::string, Tensor> old_layout(const Module& m, std::int64_t d) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : m.state_dict()) {
    const std::size_t at = name.find("qkv_proj.");
    if (at == std::string::npos || (at != 0 && name[at - 1] != '.')) {
      state.emplace(name, t.clone());
      continue;
    }
    const std::string prefix = name.substr(0, at), suffix = name.substr(at + 9);
    const char* parts[] = {"q_proj.", "k_proj.", "v_proj."};
    for (std::int64_t p = 0; p < 3; ++p) {
      state.emplace(prefix + parts[p] + suffix, t.slice(0, p * d, (p + 1) * d).contiguous().clone());
    }
  }
  return state;
}

TEST(FusedQkv, StateDictsOfTheSeparateProjectionsLoad) {
  const std::int64_t d = 16;
  MultiHeadAttention a(d, 2, true, 0.0f, true, 5), b(d, 2, true, 0.0f, true, 6);
  const Tensor x = Tensor::randn({2, 7, d}, 16);
  ASSERT_NE(a(x).to_vector(), b(x).to_vector());
  const std::map<std::string, Tensor> old = old_layout(a, d);
  ASSERT_EQ(old.count("q_proj.weight"), 1u);
  ASSERT_EQ(old.count("qkv_proj.weight"), 0u);
  b.load_state_dict(old, /*strict=*/true);
  EXPECT_EQ(b(x).to_vector(), a(x).to_vector());
  EXPECT_EQ(old.count("q_proj.weight"), 1u);  // the caller's map is left as it was

  // Nested (a GPT's blocks), through the path prefixes.
  const GptConfig c{.vocab_size = 32, .context = 8, .d_model = d, .n_heads = 2, .n_layers = 2};
  GPT g1(GptConfig{c}), g2([&] { GptConfig c2 = c; c2.seed = 9; return c2; }());
  const std::map<std::string, Tensor> old_gpt = old_layout(g1, d);
  ASSERT_EQ(old_gpt.count("blocks.1.attn.v_proj.bias"), 1u);
  ASSERT_EQ(old_gpt.count("blocks.1.attn.qkv_proj.bias"), 0u);
  const Tensor tokens = Tensor::from_vector({1, 5, 7, 2, 9, 3, 3, 0}, {1, 8});
  ASSERT_NE(g2(tokens).to_vector(), g1(tokens).to_vector());
  g2.load_state_dict(old_gpt, /*strict=*/true);
  EXPECT_EQ(g2(tokens).to_vector(), g1(tokens).to_vector());

  // Half an old layout, or both layouts at once, is refused naming the keys.
  std::map<std::string, Tensor> partial = old;
  partial.erase("v_proj.bias");
  try {
    b.load_state_dict(partial);
    ADD_FAILURE() << "a state without v_proj.bias loaded";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("v_proj.bias"), std::string::npos) << e.what();
  }
  std::map<std::string, Tensor> both = old;
  both.emplace("qkv_proj.weight", param(a, "qkv_proj.weight").clone());
  try {
    b.load_state_dict(both);
    ADD_FAILURE() << "a state with both layouts loaded";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("qkv_proj.weight"), std::string::npos) << e.what();
  }
}

TEST(FusedQkv, StartsFromTheWeightsOfTheSeparateProjections) {
  // The fused rows are drawn from the streams the separate projections used (seed * 8 + 1, 2, 3
  // for q, k, v), so a seed gives the model it gave before the fusion.
  const std::int64_t d = 12;
  const std::uint64_t seed = 7;
  MultiHeadAttention mha(d, 3, false, 0.0f, true, seed);
  const std::vector<float> w = param(mha, "qkv_proj.weight").to_vector();
  const std::vector<float> b = param(mha, "qkv_proj.bias").to_vector();
  for (std::uint64_t part = 0; part < 3; ++part) {
    const Linear separate(d, d, true, seed * 8 + 1 + part);
    const std::vector<float> sw = separate.weight().to_vector(), sb = separate.bias().to_vector();
    EXPECT_TRUE(std::equal(sw.begin(), sw.end(), w.begin() + static_cast<std::ptrdiff_t>(part * d * d)));
    EXPECT_TRUE(std::equal(sb.begin(), sb.end(), b.begin() + static_cast<std::ptrdiff_t>(part * d)));
  }
}

}  // namespace
}  // namespace mixprec::nn
