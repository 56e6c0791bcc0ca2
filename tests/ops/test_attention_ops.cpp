// scaled_dot_product_attention: gradients by finite differences in double (causal, mask,
// scale, dropout with a fixed seed), dropout statistics and reproducibility, f16 logits beyond
// the f16 range, fully masked rows, O(T * block) memory against a materialised composite, and
// the argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using testing::GradcheckInput;
using testing::VecD;

/// Attention in double on flattened [bh, t, d] inputs; mask (if any) is [tq, tk], shared by
/// every batch-head. The dropout rule is the documented one: keep iff
/// uniform(seed, (b*tq + i)*tk + j) >= p, kept probabilities scaled by 1/(1-p).
struct RefAttention {
  RefAttention(std::int64_t bh_, std::int64_t tq_, std::int64_t tk_, std::int64_t d_,
               std::int64_t dv_, double scale_, bool causal_)
      : bh(bh_), tq(tq_), tk(tk_), d(d_), dv(dv_), scale(scale_), causal(causal_) {}
  std::int64_t bh, tq, tk, d, dv;
  double scale;
  bool causal;
  std::vector<double> mask;  // empty: none
  float dropout_p = 0.0f;
  std::uint64_t seed = 0;

  VecD operator()(const std::vector<VecD>& in) const {
    const VecD &q = in[0], &k = in[1], &v = in[2];
    VecD out(static_cast<std::size_t>(bh * tq * dv), 0.0);
    std::vector<double> s(static_cast<std::size_t>(tk));
    for (std::int64_t b = 0; b < bh; ++b) {
      for (std::int64_t i = 0; i < tq; ++i) {
        double m = -INFINITY;
        for (std::int64_t j = 0; j < tk; ++j) {
          double dot = 0.0;
          for (std::int64_t c = 0; c < d; ++c) dot += q[(b * tq + i) * d + c] * k[(b * tk + j) * d + c];
          s[j] = scale * dot + (mask.empty() ? 0.0 : mask[i * tk + j]);
          if (causal && j > i) s[j] = -INFINITY;
          m = std::max(m, s[j]);
        }
        if (m == -INFINITY) continue;  // fully masked: 0
        double sum = 0.0;
        for (std::int64_t j = 0; j < tk; ++j) sum += std::exp(s[j] - m);
        for (std::int64_t j = 0; j < tk; ++j) {
          double p = std::exp(s[j] - m) / sum;
          if (dropout_p > 0.0f) {
            const auto idx = static_cast<std::uint64_t>((b * tq + i) * tk + j);
            p = uniform(seed, idx) >= dropout_p ? p / (1.0 - dropout_p) : 0.0;
          }
          for (std::int64_t c = 0; c < dv; ++c) out[(b * tq + i) * dv + c] += p * v[(b * tk + j) * dv + c];
        }
      }
    }
    return out;
  }
};

std::vector<GradcheckInput> qkv_inputs(const RefAttention& r) {
  return {{{r.bh, r.tq, r.d}, testing::random_values(r.bh * r.tq * r.d, 1, -1.5f, 1.5f)},
          {{r.bh, r.tk, r.d}, testing::random_values(r.bh * r.tk * r.d, 2, -1.5f, 1.5f)},
          {{r.bh, r.tk, r.dv}, testing::random_values(r.bh * r.tk * r.dv, 3, -1.0f, 1.0f)}};
}

TEST(AttentionOp, GradientsMatchFiniteDifferencesCausal) {
  const RefAttention r{2, 5, 7, 4, 3, 0.5, true};
  testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0f, true);
      },
      r, qkv_inputs(r));
}

TEST(AttentionOp, GradientsMatchFiniteDifferencesWithMaskAndScale) {
  RefAttention r{2, 4, 6, 3, 5, 0.8, false};
  std::vector<float> mask(24);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    mask[i] = i % 7 == 2 ? -INFINITY : 0.25f * static_cast<float>(i % 5) - 0.5f;
  }
  r.mask.assign(mask.begin(), mask.end());
  const Tensor m = Tensor::from_vector(mask, {4, 6});
  testing::gradcheck(
      [m](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], m, 0.0f, false, 0.8f);
      },
      r, qkv_inputs(r));
}

TEST(AttentionOp, GradientsMatchFiniteDifferencesWithDropoutAtAFixedSeed) {
  // The mask is a pure function of (seed, position), so the op is a fixed function of q, k, v
  // for a given seed, and the backward must be its exact gradient.
  RefAttention r{2, 5, 6, 4, 3, 0.5, true};
  r.dropout_p = 0.4f;
  r.seed = 99;
  testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.4f, true, 0.5f, 99);
      },
      r, qkv_inputs(r));
}

TEST(AttentionOp, MatchesTheMaterialisedFormulaWithBroadcastMaskAndFourDimensions) {
  // q [2, 3, T, D] (batch, heads) with a mask [2, 1, T, T] broadcast over heads.
  const std::int64_t B = 2, H = 3, T = 70, D = 16;
  const Tensor q = Tensor::randn({B, H, T, D}, 1), k = Tensor::randn({B, H, T, D}, 2),
               v = Tensor::randn({B, H, T, D}, 3);
  const Tensor mask = Tensor::randn({B, 1, T, T}, 4);
  const Tensor y = scaled_dot_product_attention(q, k, v, mask, 0.0f, false, 0.3f);
  ASSERT_EQ(y.shape(), (Shape{B, H, T, D}));
  const std::vector<float> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector(),
                           mv = mask.to_vector(), yv = y.to_vector();
  for (std::int64_t b = 0; b < B; ++b) {
    RefAttention r{H, T, T, D, D, 0.3, false};
    r.mask.assign(mv.begin() + b * T * T, mv.begin() + (b + 1) * T * T);
    const std::int64_t n = H * T * D;
    const VecD want = r({VecD(qv.begin() + b * n, qv.begin() + (b + 1) * n),
                         VecD(kv.begin() + b * n, kv.begin() + (b + 1) * n),
                         VecD(vv.begin() + b * n, vv.begin() + (b + 1) * n)});
    for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(yv[b * n + i], want[i], 2e-5) << b << " " << i;
  }
}

TEST(AttentionOp, DropoutIsReproducibleAndDropsAboutP) {
  // q = k = 0 makes every probability 1/Tk; v = I (Dv = Tk) makes out[i, j] = z_ij / Tk, so
  // the output shows the dropout mask itself.
  const std::int64_t BH = 4, T = 64;
  const float p = 0.3f;
  std::vector<float> eye(static_cast<std::size_t>(BH * T * T), 0.0f);
  for (std::int64_t b = 0; b < BH; ++b) {
    for (std::int64_t j = 0; j < T; ++j) eye[(b * T + j) * T + j] = 1.0f;
  }
  const Tensor zeros = Tensor::zeros({BH, T, 8}), v = Tensor::from_vector(eye, {BH, T, T});
  const std::vector<float> a = scaled_dot_product_attention(zeros, zeros, v, {}, p, false, {}, 5).to_vector();
  const std::vector<float> b = scaled_dot_product_attention(zeros, zeros, v, {}, p, false, {}, 5).to_vector();
  const std::vector<float> c = scaled_dot_product_attention(zeros, zeros, v, {}, p, false, {}, 6).to_vector();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::int64_t dropped = 0;
  const float kept = 1.0f / (1.0f - p) / static_cast<float>(T);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 0.0f) {
      ++dropped;
    } else {
      ASSERT_NEAR(a[i], kept, 1e-6f) << i;
    }
    const auto idx = static_cast<std::uint64_t>(i);  // out [b, i, j] sits at (b*T + i)*T + j
    EXPECT_EQ(a[i] == 0.0f, uniform(5, idx) < p) << i;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(a.size()), p, 0.02);
}

TEST(AttentionOp, F16LogitsBeyondTheF16RangeStayFinite) {
  // q . k ~ 1e5 overflows f16 (max 65504) but the scores never exist in f16: softmax in f32.
  const Tensor q = Tensor::full({1, 2, 3, 4}, 160.0f, DType::f16);
  std::vector<float> kv(2 * 5 * 4);
  for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = 40.0f * static_cast<float>(i / 4 % 5);
  const Tensor k = Tensor::from_vector(kv, {1, 2, 5, 4}, DType::f16);  // key 4: 4*160*160 = 102400
  const Tensor v = Tensor::randn({1, 2, 5, 4}, 7, DType::f16);
  Tensor qg = q, kg = k, vg = v;
  qg.set_requires_grad(true);
  kg.set_requires_grad(true);
  vg.set_requires_grad(true);
  const Tensor y = scaled_dot_product_attention(qg, kg, vg, {}, 0.0f, false, 1.0f);
  EXPECT_EQ(y.dtype(), DType::f16);
  const std::vector<float> yv = y.to_vector(), vv = v.to_vector();
  for (std::int64_t h = 0; h < 2; ++h) {
    for (std::int64_t i = 0; i < 3; ++i) {
      for (std::int64_t c = 0; c < 4; ++c) {  // all the weight on key 4 (the others are e^-25600 smaller)
        EXPECT_EQ(yv[(h * 3 + i) * 4 + c], vv[(h * 5 + 4) * 4 + c]);
      }
    }
  }
  y.backward(Tensor::ones(y.shape(), DType::f16));
  for (const Tensor* t : {&qg, &kg, &vg}) {
    for (float g : t->grad().to_vector()) EXPECT_TRUE(std::isfinite(g));
  }
}

TEST(AttentionOp, AFullyMaskedRowGivesZeroOutputAndZeroGradient) {
  std::vector<float> mask(3 * 4, 0.0f);
  for (int j = 0; j < 4; ++j) mask[1 * 4 + j] = -INFINITY;  // query 1 sees no key
  Tensor q = Tensor::randn({2, 3, 5}, 1), k = Tensor::randn({2, 4, 5}, 2), v = Tensor::randn({2, 4, 6}, 3);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  const Tensor y = scaled_dot_product_attention(q, k, v, Tensor::from_vector(mask, {3, 4}));
  const std::vector<float> yv = y.to_vector();
  // dout nonzero only on the masked row: nothing may flow anywhere.
  std::vector<float> g(yv.size(), 0.0f);
  for (int b = 0; b < 2; ++b) {
    for (int c = 0; c < 6; ++c) {
      EXPECT_EQ(yv[(b * 3 + 1) * 6 + c], 0.0f);
      g[(b * 3 + 1) * 6 + c] = 1.0f;
    }
  }
  y.backward(Tensor::from_vector(g, y.shape()));
  for (const Tensor* t : {&q, &k, &v}) {
    for (float x : t->grad().to_vector()) EXPECT_EQ(x, 0.0f);
  }
}

/// Tensor bytes allocated beyond what was live when fn started, at the peak.
template <class F>
std::size_t peak_extra_bytes(F&& fn) {
  reset_peak_memory();
  const std::size_t base = memory_stats().total_current;
  fn();
  return memory_stats().total_peak - base;
}

TEST(AttentionOp, MemoryIsLinearInTheSequenceLength) {
  // T = 1024, one head of 16: the materialised version holds the [T, T] f32 scores and
  // probabilities (4 MiB each); the blocked op only O(T) tensors (output, lse, gradients).
  const std::int64_t T = 1024, D = 16;
  const std::size_t scores_bytes = static_cast<std::size_t>(T * T) * sizeof(float);
  Tensor q = Tensor::randn({1, T, D}, 1), k = Tensor::randn({1, T, D}, 2), v = Tensor::randn({1, T, D}, 3);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  const std::size_t blocked = peak_extra_bytes([&] {
    const Tensor y = scaled_dot_product_attention(q, k, v, {}, 0.0f, true);
    y.backward(Tensor::ones(y.shape()));
  });
  const std::vector<float> dq_blocked = q.grad().to_vector();
  for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
  const std::size_t naive = peak_extra_bytes([&] {
    const Tensor s = matmul(q, k.transpose(1, 2)) * 0.25f;
    const Tensor y = matmul(softmax(s), v);  // not causal: the memory is what matters here
    y.backward(Tensor::ones(y.shape()));
  });
  RecordProperty("blocked_peak_extra_bytes", std::to_string(blocked));
  RecordProperty("naive_peak_extra_bytes", std::to_string(naive));
  EXPECT_GE(naive, scores_bytes);  // the harness sees the materialised matrix
  EXPECT_LT(blocked, scores_bytes / 8) << "blocked " << blocked << " bytes, naive " << naive;
  for (float g : dq_blocked) ASSERT_TRUE(std::isfinite(g));
}

template <class E, class F>
void expect_error(F&& fn, const char* what) {
  try {
    fn();
    ADD_FAILURE() << what << ": no error";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find("scaled_dot_product_attention"), std::string::npos)
        << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong exception type: " << e.what();
  }
}

TEST(AttentionOp, RejectsBadInputsWithTypedErrorsNamingTheOp) {
  const Tensor q = Tensor::randn({2, 4, 8}, 1), k = Tensor::randn({2, 6, 8}, 2),
               v = Tensor::randn({2, 6, 5}, 3);
  const auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m = {},
                       float p = 0.0f) { return scaled_dot_product_attention(a, b, c, m, p); };
  expect_error<ShapeError>([&] { sdpa(Tensor::randn({8}, 1), k, v); }, "rank 1");
  expect_error<ShapeError>([&] { sdpa(q, Tensor::randn({2, 6, 7}, 2), v); }, "D differs");
  expect_error<ShapeError>([&] { sdpa(q, k, Tensor::randn({2, 5, 5}, 3)); }, "Tk differs");
  expect_error<ShapeError>([&] { sdpa(q, Tensor::randn({3, 6, 8}, 2), Tensor::randn({3, 6, 5}, 3)); },
                           "leading dims differ");
  expect_error<ShapeError>([&] { sdpa(q.reshape({1, 2, 4, 8}), k, v); }, "ranks differ");
  expect_error<DTypeError>([&] { sdpa(q, k.to(DType::bf16), v); }, "mixed dtypes");
  expect_error<ValueError>([&] { sdpa(q, k, v, {}, 1.0f); }, "dropout_p = 1");
  expect_error<ValueError>([&] { sdpa(q, k, v, {}, -0.1f); }, "dropout_p < 0");
  expect_error<ShapeError>([&] { sdpa(q, k, v, Tensor::zeros({4, 5})); }, "mask [4, 5]");
  expect_error<ShapeError>([&] { sdpa(q, k, v, Tensor::zeros({3, 4, 6})); }, "mask [3, 4, 6]");
  expect_error<ShapeError>([&] { sdpa(q, k, v, Tensor::zeros({1, 1, 4, 6})); }, "mask rank 4");
  EXPECT_NO_THROW(sdpa(q, k, v, Tensor::zeros({2, 1, 6})));  // broadcasts over queries
}

TEST(AttentionOp, UnderAutocastRunsIn16BitsWithF32Softmax) {
  const Tensor q = Tensor::randn({2, 8, 16}, 1), k = Tensor::randn({2, 8, 16}, 2),
               v = Tensor::randn({2, 8, 16}, 3);
  const std::vector<float> want = scaled_dot_product_attention(q, k, v, {}, 0.0f, true).to_vector();
  runtime::Autocast region(true, DType::bf16);
  const Tensor y = scaled_dot_product_attention(q, k, v, {}, 0.0f, true);
  EXPECT_EQ(y.dtype(), DType::bf16);
  const std::vector<float> got = y.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.05) << i;
}

}  // namespace
}  // namespace mixprec
