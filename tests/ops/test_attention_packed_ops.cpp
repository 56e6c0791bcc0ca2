// packed_qkv_attention: bit for bit scaled_dot_product_attention on the three slices of the
// packed projection split into heads (forward and the one packed gradient), on ref, cpu and
// devsim, in every dtype, with the causal cut, a mask and dropout; gradients by finite
// differences in double; autocast; and the argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_scope.h"
#include "gradcheck.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using testing::BackendScope;
using testing::GradcheckInput;
using testing::VecD;

struct Variant {
  const char* name;
  bool causal, masked;
  float dropout;
};
constexpr Variant kVariants[] = {{"plain", false, false, 0.0f},
                                 {"causal", true, false, 0.0f},
                                 {"mask", false, true, 0.0f},
                                 {"causal+mask+dropout", true, true, 0.3f}};

/// A [B, 1, T, T] additive mask broadcast over heads: random biases, every 7th key blocked.
Tensor make_mask(std::int64_t b, std::int64_t t) {
  std::vector<float> m = Tensor::randn({b, 1, t, t}, 91).to_vector();
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (i % 7 == 3) m[i] = -INFINITY;
  }
  return Tensor::from_vector(m, {b, 1, t, t});
}

struct Outputs {
  std::vector<float> y, dqkv;
};

/// The packed op, or the reference composition: q, k, v sliced out of qkv, split into heads
/// ([B, H, T, w] views), scaled_dot_product_attention, heads merged back.
Outputs run(bool packed, const Tensor& qkv_values, std::int64_t heads, const Variant& v,
        const Tensor& mask, const Tensor& dy) {
  Tensor qkv = qkv_values.clone();
  qkv.set_requires_grad(true);
  const std::int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / 3, w = d / heads;
  Tensor y;
  if (packed) {
    y = packed_qkv_attention(qkv, heads, mask, v.dropout, v.causal, {}, 1234);
  } else {
    const auto split = [&](std::int64_t part) {
      return qkv.slice(2, part * d, (part + 1) * d).reshape({b, t, heads, w}).permute({0, 2, 1, 3});
    };
    y = scaled_dot_product_attention(split(0), split(1), split(2), mask, v.dropout, v.causal, {}, 1234)
            .permute({0, 2, 1, 3})
            .contiguous()
            .reshape({b, t, d});
  }
  EXPECT_EQ(y.shape(), (Shape{b, t, d}));
  EXPECT_EQ(y.dtype(), qkv.dtype());
  y.backward(dy);
  return {y.to(DType::f32).to_vector(), qkv.grad().to(DType::f32).to_vector()};
}

TEST(PackedQkvAttention, EqualsAttentionOnTheSplitHeadsBitForBit) {
  // Only where q, k, v are read and dq, dk, dv written differs (the rows of one [B, T, 3D]
  // buffer, token rows 3D apart, against contiguous copies), so every backend computes the same
  // sums in the same order: the same bits, forward and gradient. T = 70 leaves a partial block
  // of the cpu kernel's 64; w = 16.
  const std::int64_t B = 2, T = 70, H = 3, W = 16, D = H * W;
  for (const char* backend : {"ref", "cpu", "devsim"}) {
    BackendScope scope(backend);
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      const Tensor qkv = Tensor::uniform({B, T, 3 * D}, 5, -1.5f, 1.5f).to(dtype);
      const Tensor dy = Tensor::uniform({B, T, D}, 6, -1.0f, 1.0f).to(dtype);
      const Tensor mask = make_mask(B, T);
      for (const Variant& v : kVariants) {
        SCOPED_TRACE(std::string(backend) + " " + name(dtype) + " " + v.name);
        const Tensor m = v.masked ? mask : Tensor();
        const Outputs packed = run(true, qkv, H, v, m, dy), split = run(false, qkv, H, v, m, dy);
        EXPECT_EQ(packed.y, split.y);
        EXPECT_EQ(packed.dqkv, split.dqkv);
        // Not vacuous: every part of the gradient (dq, dk, dv) carries signal.
        for (std::int64_t part = 0; part < 3; ++part) {
          double norm = 0.0;
          for (std::int64_t r = 0; r < B * T; ++r) {
            for (std::int64_t c = 0; c < D; ++c) {
              norm += std::fabs(packed.dqkv[static_cast<std::size_t>(r * 3 * D + part * D + c)]);
            }
          }
          EXPECT_GT(norm, 0.0) << "part " << part;
        }
      }
    }
  }
}

/// The packed op in double on a flattened [B, T, 3D] input: per batch b and head h, q, k, v
/// are columns [h w, (h+1) w) of the row's first, second and third D; optional [T, T] mask
/// shared by every batch-head; dropout as documented (index ((b H + h) T + i) T + j).
struct RefPacked {
  std::int64_t b, t, heads, w;
  double scale;
  bool causal;
  std::vector<double> mask;  // empty: none
  float dropout_p = 0.0f;
  std::uint64_t seed = 0;

  VecD operator()(const std::vector<VecD>& in) const {
    const VecD& x = in[0];
    const std::int64_t d = heads * w, row = 3 * d;
    VecD out(static_cast<std::size_t>(b * t * d), 0.0);
    std::vector<double> s(static_cast<std::size_t>(t));
    for (std::int64_t bi = 0; bi < b; ++bi) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const auto at = [&](std::int64_t token, std::int64_t part, std::int64_t c) {
          return x[static_cast<std::size_t>((bi * t + token) * row + part * d + h * w + c)];
        };
        for (std::int64_t i = 0; i < t; ++i) {
          double m = -INFINITY;
          for (std::int64_t j = 0; j < t; ++j) {
            double dot = 0.0;
            for (std::int64_t c = 0; c < w; ++c) dot += at(i, 0, c) * at(j, 1, c);
            s[j] = scale * dot + (mask.empty() ? 0.0 : mask[static_cast<std::size_t>(i * t + j)]);
            if (causal && j > i) s[j] = -INFINITY;
            m = std::max(m, s[j]);
          }
          if (m == -INFINITY) continue;
          double sum = 0.0;
          for (std::int64_t j = 0; j < t; ++j) sum += std::exp(s[j] - m);
          for (std::int64_t j = 0; j < t; ++j) {
            double p = std::exp(s[j] - m) / sum;
            if (dropout_p > 0.0f) {
              const auto idx = static_cast<std::uint64_t>(((bi * heads + h) * t + i) * t + j);
              p = uniform(seed, idx) >= dropout_p ? p / (1.0 - dropout_p) : 0.0;
            }
            for (std::int64_t c = 0; c < w; ++c) {
              out[static_cast<std::size_t>((bi * t + i) * d + h * w + c)] += p * at(j, 2, c);
            }
          }
        }
      }
    }
    return out;
  }
};

TEST(PackedQkvAttention, GradientsMatchFiniteDifferences) {
  // Causal; then a mask with a blocked key per row and a scale; then dropout at a fixed seed.
  const std::int64_t B = 2, T = 5, H = 2, W = 3;
  const std::vector<GradcheckInput> in{
      {{B, T, 3 * H * W}, testing::random_values(B * T * 3 * H * W, 7, -1.5f, 1.5f)}};
  RefPacked causal{B, T, H, W, 1.0 / std::sqrt(3.0), true, {}};
  testing::gradcheck(
      [](const std::vector<Tensor>& x) { return packed_qkv_attention(x[0], 2, {}, 0.0f, true); },
      causal, in);

  RefPacked masked{B, T, H, W, 0.7, false, {}};
  std::vector<float> mask(T * T);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    mask[i] = i % 6 == 1 ? -INFINITY : 0.3f * static_cast<float>(i % 4) - 0.4f;
  }
  masked.mask.assign(mask.begin(), mask.end());
  const Tensor m = Tensor::from_vector(mask, {T, T});
  testing::gradcheck(
      [m](const std::vector<Tensor>& x) { return packed_qkv_attention(x[0], 2, m, 0.0f, false, 0.7f); },
      masked, in);

  RefPacked dropped{B, T, H, W, 0.5, true, {}};
  dropped.dropout_p = 0.4f;
  dropped.seed = 17;
  testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return packed_qkv_attention(x[0], 2, {}, 0.4f, true, 0.5f, 17);
      },
      dropped, in);
}

TEST(PackedQkvAttention, ReadsAStridedInputAndRunsIn16BitsUnderAutocast) {
  const Tensor qkv = Tensor::randn({2, 9, 24}, 8);
  const std::vector<float> want = packed_qkv_attention(qkv, 2, {}, 0.0f, true).to_vector();
  // The same values in another memory order: packed once, same result.
  const Tensor transposed = qkv.transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(transposed.is_contiguous());
  EXPECT_EQ(packed_qkv_attention(transposed, 2, {}, 0.0f, true).to_vector(), want);

  Tensor leaf = qkv.clone();
  leaf.set_requires_grad(true);
  Tensor y;
  {
    runtime::Autocast region(true, DType::bf16);
    y = packed_qkv_attention(leaf, 2, {}, 0.0f, true);
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  const std::vector<float> got = y.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.05) << i;
  sum(y.to(DType::f32)).backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_EQ(leaf.grad().dtype(), DType::f32);  // through the cast, back to the f32 leaf
  EXPECT_EQ(leaf.grad().shape(), qkv.shape());
}

template <class E, class F>
void expect_error(F&& f, const char* why) {
  try {
    f();
    ADD_FAILURE() << "no error: " << why;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find("packed_qkv_attention"), std::string::npos)
        << why << ": " << e.what();
  }
}

TEST(PackedQkvAttention, RefusesBadArgumentsNamingTheOp) {
  const Tensor qkv = Tensor::randn({2, 4, 12}, 9);
  expect_error<ShapeError>([&] { packed_qkv_attention(Tensor::randn({4, 12}, 1), 2); }, "rank 2");
  expect_error<ShapeError>([&] { packed_qkv_attention(Tensor::randn({2, 4, 10}, 1), 2); }, "not 3 D");
  expect_error<ShapeError>([&] { packed_qkv_attention(Tensor::randn({2, 4, 0}, 1), 1); }, "D = 0");
  expect_error<ShapeError>([&] { packed_qkv_attention(qkv, 3); }, "heads do not divide D = 4");
  expect_error<ShapeError>([&] { packed_qkv_attention(qkv, 0); }, "no heads");
  expect_error<ValueError>([&] { packed_qkv_attention(qkv, 2, {}, 1.0f); }, "dropout_p = 1");
  expect_error<ShapeError>([&] { packed_qkv_attention(qkv, 2, Tensor::zeros({4, 5})); }, "mask [4, 5]");
  expect_error<StateError>([&] { packed_qkv_attention(Tensor(), 2); }, "undefined");
  EXPECT_NO_THROW(packed_qkv_attention(qkv, 2, Tensor::zeros({2, 1, 1, 4})));  // broadcasts
}

}  // namespace
}  // namespace mixprec
