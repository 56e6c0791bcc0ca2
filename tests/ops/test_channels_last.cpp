// Channels-last memory format: the tensor's strides, contiguous(format) and its gradient, the
// layout-keeping ops (convolution, batch norm, max/avg pooling, element-wise, casts) with their
// gradients against double finite differences, and a conv-BN-ReLU-pool block computing the same
// values in both layouts on every host backend.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend_scope.h"
#include "gradcheck.h"
#include "ops/conv_reference.h"
#include "mixprec/ops/conv.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/normalization.h"
#include "mixprec/ops/reduce.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;
constexpr MemoryFormat kCl = MemoryFormat::channels_last;

TEST(MemoryFormat, EmptyChannelsLastHasNhwcStrides) {
  const Tensor t = Tensor::empty({2, 3, 4, 5}, DType::bf16, kCl);
  EXPECT_EQ(t.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_EQ(t.memory_format(), kCl);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.is_contiguous(kCl));
  EXPECT_EQ(Tensor::empty({2, 3, 4, 5}).memory_format(), MemoryFormat::contiguous);
  EXPECT_THROW(Tensor::empty({2, 3, 4}, DType::f32, kCl), ShapeError);
}

TEST(MemoryFormat, ContiguousChannelsLastKeepsValuesAndRoundTrips) {
  const Tensor x = Tensor::randn({2, 3, 4, 5}, 11);
  const Tensor cl = x.contiguous(kCl);
  EXPECT_EQ(cl.memory_format(), kCl);
  EXPECT_EQ(cl.to_vector(), x.to_vector());  // same logical values, row-major order
  EXPECT_TRUE(cl.contiguous(kCl).is_same(cl));  // already so: no copy
  const Tensor back = cl.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(back.to_vector(), x.to_vector());
  // Memory holds a pixel's channels side by side: (0, 1, 0, 0) is the second word.
  EXPECT_EQ(static_cast<const float*>(cl.data_ptr())[1], x.to_vector()[20]);
  EXPECT_THROW(Tensor::randn({3, 4}, 1).contiguous(kCl), ShapeError);
}

TEST(MemoryFormat, OneChannelImageIsRestridedWithoutACopy) {
  // [N, 1, H, W] is laid out the same both ways; only the strides record the choice.
  const Tensor x = Tensor::randn({2, 1, 3, 4}, 12);
  const Tensor cl = x.contiguous(kCl);
  EXPECT_EQ(cl.data_ptr(), x.data_ptr());
  EXPECT_EQ(cl.strides(), (Shape{12, 1, 4, 1}));
  EXPECT_EQ(cl.memory_format(), kCl);
  EXPECT_EQ(x.memory_format(), MemoryFormat::contiguous);
}

TEST(MemoryFormat, NamesParse) {
  EXPECT_EQ(parse_memory_format("channels-last"), kCl);
  EXPECT_EQ(parse_memory_format("channels_last"), kCl);
  EXPECT_EQ(parse_memory_format("contiguous"), MemoryFormat::contiguous);
  EXPECT_STREQ(name(kCl), "channels-last");
  try {
    parse_memory_format("nhwc");
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("channels-last"), std::string::npos) << e.what();
  }
}

TEST(MemoryFormat, GradientFlowsThroughTheConversion) {
  gradcheck([](const Ts& t) { return mul(t[0].contiguous(kCl), t[1]); },
            [](const Vs& v) {
              VecD y(v[0].size());
              for (std::size_t i = 0; i < y.size(); ++i) y[i] = v[0][i] * v[1][i];
              return y;
            },
            {{{2, 3, 2, 2}, random_values(24, 1)}, {{2, 3, 2, 2}, random_values(24, 2)}});
}

TEST(MemoryFormat, LayoutKeepingOpsGiveChannelsLast) {
  const Tensor x = Tensor::randn({2, 4, 6, 6}, 13).contiguous(kCl);
  const Tensor w = Tensor::randn({8, 4, 3, 3}, 14);
  Tensor rm = Tensor::zeros({8}), rv = Tensor::ones({8});
  const Tensor y = conv2d(x, w, Tensor(), 1, 1);
  EXPECT_EQ(y.memory_format(), kCl);
  const Tensor bn = batch_norm(y, rm, rv, Tensor(), Tensor(), true);
  EXPECT_EQ(bn.memory_format(), kCl);
  EXPECT_EQ(relu(bn).memory_format(), kCl);
  EXPECT_EQ(add(bn, y).memory_format(), kCl);
  EXPECT_EQ(add(bn, Tensor::ones({8, 1, 1})).memory_format(), kCl);  // a broadcast bias
  EXPECT_EQ(max_pool2d(bn, 3, 2, 1).memory_format(), kCl);
  EXPECT_EQ(avg_pool2d(bn, 2, 2).memory_format(), kCl);
  EXPECT_EQ(bn.to(DType::bf16).memory_format(), kCl);
  EXPECT_EQ(add(bn.contiguous(), y.contiguous()).memory_format(), MemoryFormat::contiguous);
}

// The ops' gradients in channels-last, against the same double references as NCHW: the input
// is converted inside the op under test, so every gradient also crosses contiguous(format).
TEST(MemoryFormatGrad, Conv2dChannelsLast) {
  for (const char* backend : {"cpu", "ref"}) {
    SCOPED_TRACE(backend);
    BackendScope scope(backend);
    for (const std::int64_t stride : {1, 2}) {
      gradcheck([stride](const Ts& t) { return conv2d(t[0].contiguous(kCl), t[1], Tensor(), stride, 1); },
                [stride](const Vs& v) {
                  return conv_ref(ConvCfg{2, 3, 5, 6, 4, 3, stride, 1}, v[0], v[1], nullptr);
                },
                {{{2, 3, 5, 6}, random_values(180, 20 + static_cast<std::uint64_t>(stride))},
                 {{4, 3, 3, 3}, random_values(108, 30 + static_cast<std::uint64_t>(stride))}});
    }
  }
}

TEST(MemoryFormatGrad, PoolingChannelsLast) {
  struct P {
    std::int64_t k, s, p;
  };
  for (const char* backend : {"cpu", "ref"}) {
    SCOPED_TRACE(backend);
    BackendScope scope(backend);
    std::uint64_t seed = 40;
    for (const P& c : {P{2, 2, 0}, P{3, 2, 1}, P{3, 1, 1}}) {
      for (const bool max : {true, false}) {
        gradcheck(
            [c, max](const Ts& t) {
              const Tensor x = t[0].contiguous(kCl);
              return max ? max_pool2d(x, c.k, c.s, c.p) : avg_pool2d(x, c.k, c.s, c.p);
            },
            [c, max](const Vs& v) { return pool_ref(v[0], 6, 5, 6, c.k, c.s, c.p, max); },
            {{{2, 3, 5, 6}, random_values(180, ++seed)}});
      }
    }
  }
}

TEST(MemoryFormatGrad, BatchNormChannelsLast) {
  const std::int64_t n = 3, c = 4, s = 6;
  gradcheck(
      [&](const Ts& t) {
        Tensor rm = Tensor::zeros({c}), rv = Tensor::ones({c});
        return batch_norm(t[0].contiguous(kCl), rm, rv, t[1], t[2], true);
      },
      [&](const Vs& v) {
        VecD y(v[0].size());
        for (std::int64_t k = 0; k < c; ++k) {
          auto at = [&](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>((i * c + k) * s + j); };
          double sum = 0, sq = 0;
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < s; ++j) sum += v[0][at(i, j)];
          const double mean = sum / static_cast<double>(n * s);
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < s; ++j) sq += (v[0][at(i, j)] - mean) * (v[0][at(i, j)] - mean);
          const double invstd = 1.0 / std::sqrt(sq / static_cast<double>(n * s) + 1e-5);
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < s; ++j) {
              y[at(i, j)] = (v[0][at(i, j)] - mean) * invstd * v[1][static_cast<std::size_t>(k)] +
                            v[2][static_cast<std::size_t>(k)];
            }
        }
        return y;
      },
      {{{n, c, 2, 3}, random_values(static_cast<std::size_t>(n * c * s), 50)},
       {{c}, random_values(static_cast<std::size_t>(c), 51, 0.5f, 1.5f)},
       {{c}, random_values(static_cast<std::size_t>(c), 52)}});
}

// A conv-BN-ReLU-pool-residual block and its gradients, run on an NCHW input and on the same
// input in channels-last. Returns the loss, the input's gradient and the weight's.
struct BlockRun {
  std::vector<float> y, dx, dw;
};

BlockRun run_block(MemoryFormat format, DType dtype) {
  Tensor x = Tensor::randn({4, 8, 10, 10}, 61, dtype);
  x.set_requires_grad(true);
  Tensor w = Tensor::randn({8, 8, 3, 3}, 62, dtype, 0.0f, 0.2f);
  w.set_requires_grad(true);
  Tensor rm = Tensor::zeros({8}), rv = Tensor::ones({8});
  const Tensor in = x.contiguous(format);
  const Tensor h = relu(batch_norm(conv2d(in, w, Tensor(), 1, 1), rm, rv, Tensor(), Tensor(), true));
  const Tensor out = max_pool2d(add(h, in), 3, 2, 1);
  EXPECT_EQ(out.memory_format(), format);
  sum(mul(out, out)).backward();
  return {out.to_vector(), x.grad().to_vector(), w.grad().to_vector()};
}

TEST(MemoryFormat, BlockComputesTheSameInBothLayouts) {
  for (const char* backend : {"ref", "cpu", "devsim"}) {
    for (const DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(backend) + " " + name(dtype));
      BackendScope scope(backend);
      const BlockRun a = run_block(MemoryFormat::contiguous, dtype);
      const BlockRun b = run_block(kCl, dtype);
      // The reference (and devsim, which runs it) sums in the same order in both layouts; oneDNN
      // picks other kernels for NHWC, whose f32 sums may differ in order.
      const bool exact = std::string(backend) != "cpu";
      const double tol = exact ? 0.0 : (dtype == DType::f32 ? 1e-4 : 2e-2);
      ASSERT_EQ(a.y.size(), b.y.size());
      for (const auto& [u, v, what] : {std::tuple{&a.y, &b.y, "y"}, std::tuple{&a.dx, &b.dx, "dx"},
                                        std::tuple{&a.dw, &b.dw, "dw"}}) {
        double worst = 0.0, scale = 0.0;
        for (std::size_t i = 0; i < u->size(); ++i) {
          worst = std::max(worst, static_cast<double>(std::fabs((*u)[i] - (*v)[i])));
          scale = std::max(scale, static_cast<double>(std::fabs((*u)[i])));
        }
        EXPECT_LE(worst, tol * std::max(scale, 1.0)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace mixprec::testing
