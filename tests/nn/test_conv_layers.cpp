// Conv2d and the pooling layers: parameters, initialisation, forward shapes, argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/mixprec.h"
#include "mixprec/nn/conv_layers.h"

namespace mixprec::nn {
namespace {

TEST(ConvLayers, Conv2dParametersAndInit) {
  Conv2d conv(3, 16, 3, 1, 1, true, 7);
  EXPECT_EQ(conv.type_name(), "Conv2d");
  const NamedTensors params = conv.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[1].first, "bias");
  EXPECT_EQ(conv.weight().shape(), (Shape{16, 3, 3, 3}));
  EXPECT_EQ(conv.bias().shape(), (Shape{16}));
  EXPECT_TRUE(conv.weight().requires_grad());
  EXPECT_EQ(conv.parameter_count(), 16 * 27 + 16);
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 3 * 3 * 3: within the bound and spread over it.
  const float bound = 1.0f / std::sqrt(27.0f);
  for (const Tensor& t : {conv.weight(), conv.bias()}) {
    float lo = 1, hi = -1;
    for (float v : t.to_vector()) {
      ASSERT_LE(std::fabs(v), bound);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_LT(lo, -0.5f * bound);
    EXPECT_GT(hi, 0.5f * bound);
  }
  // Same seed, same weights; another seed, different weights.
  EXPECT_EQ(Conv2d(3, 16, 3, 1, 1, true, 7).weight().to_vector(), conv.weight().to_vector());
  EXPECT_NE(Conv2d(3, 16, 3, 1, 1, true, 8).weight().to_vector(), conv.weight().to_vector());
}

TEST(ConvLayers, Conv2dWithoutBiasAndDtype) {
  Conv2d conv(1, 4, 5, 2, 2, false, 0, DType::bf16);
  EXPECT_FALSE(conv.bias().defined());
  EXPECT_EQ(conv.named_parameters().size(), 1u);
  EXPECT_EQ(conv.weight().dtype(), DType::bf16);
  const Tensor y = conv(Tensor::randn({2, 1, 28, 28}, 1, DType::bf16));
  EXPECT_EQ(y.shape(), (Shape{2, 4, 14, 14}));
  EXPECT_EQ(y.dtype(), DType::bf16);
}

TEST(ConvLayers, FashionMnistCnnShapes) {
  // conv3x3(pad 1) - relu - maxpool2, twice, then global average pooling.
  auto net = sequential({std::make_shared<Conv2d>(1, 32, 3, 1, 1, true, 1),
                         std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
                         std::make_shared<Conv2d>(32, 64, 3, 1, 1, true, 2),
                         std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
                         std::make_shared<AvgPool2d>(3, 1, 1), std::make_shared<GlobalAvgPool2d>()});
  const Tensor y = (*net)(Tensor::randn({4, 1, 28, 28}, 3));
  EXPECT_EQ(y.shape(), (Shape{4, 64}));
  EXPECT_EQ(net->named_parameters()[0].first, "0.weight");
  EXPECT_EQ(net->named_parameters()[2].first, "3.weight");
  sum(y).backward();
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST(ConvLayers, PoolingLayers) {
  const Tensor x = Tensor::randn({2, 3, 9, 9}, 4);
  MaxPool2d mp(3, 2, 1);
  AvgPool2d ap(2);
  GlobalAvgPool2d gp;
  EXPECT_EQ(mp.type_name(), "MaxPool2d");
  EXPECT_EQ(ap.type_name(), "AvgPool2d");
  EXPECT_EQ(gp.type_name(), "GlobalAvgPool2d");
  EXPECT_EQ(mp(x).shape(), (Shape{2, 3, 5, 5}));
  EXPECT_EQ(ap(x).shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(gp(x).shape(), (Shape{2, 3}));
  EXPECT_TRUE(mp.named_parameters().empty());
}

TEST(ConvLayers, RejectsBadArguments) {
  EXPECT_THROW(Conv2d(0, 4, 3), ValueError);
  EXPECT_THROW(Conv2d(3, 4, 0), ValueError);
  EXPECT_THROW(Conv2d(3, 4, 3, 0), ValueError);
  EXPECT_THROW(Conv2d(3, 4, 3, 1, -1), ValueError);
  EXPECT_THROW(MaxPool2d(0), ValueError);
  EXPECT_THROW(MaxPool2d(2, 2, 2), ValueError);
  EXPECT_THROW(AvgPool2d(2, -1), ValueError);
  Conv2d conv(3, 4, 3);
  EXPECT_THROW(conv(Tensor::randn({2, 2, 8, 8}, 1)), ShapeError);
}

}  // namespace
}  // namespace mixprec::nn
