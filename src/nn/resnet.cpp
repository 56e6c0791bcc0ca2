#include "mixprec/nn/resnet.h"

#include <utility>

#include "mixprec/core/error.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/conv.h"
#include "mixprec/ops/elementwise.h"

namespace mixprec::nn {

Bottleneck::Bottleneck(std::int64_t in_channels, std::int64_t width, std::int64_t stride,
                       std::uint64_t seed) {
  MIXPREC_CHECK(in_channels >= 1 && width >= 1 && stride >= 1, ValueError, "Bottleneck",
                "in_channels, width and stride must be >= 1, got " << in_channels << ", "
                                                                  << width << ", " << stride);
  const std::int64_t out = kExpansion * width;
  // Seeds apart by 4 per convolution: each Conv2d draws two streams (weight, bias).
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_channels, width, 1, 1, 0, false, seed));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(width));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(width, width, 3, stride, 1, false, seed + 4));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(width));
  conv3_ = register_module("conv3", std::make_shared<Conv2d>(width, out, 1, 1, 0, false, seed + 8));
  bn3_ = register_module("bn3", std::make_shared<BatchNorm2d>(out));
  if (stride != 1 || in_channels != out) {
    downsample_ = register_module(
        "downsample", sequential({std::make_shared<Conv2d>(in_channels, out, 1, stride, 0, false, seed + 12),
                                  std::make_shared<BatchNorm2d>(out)}));
  }
}

Tensor Bottleneck::forward(const Tensor& x) {
  // Each norm and the ReLU after it (with the shortcut added between, at the end) run as one
  // op: BatchNormBase::relu_forward.
  Tensor y = bn1_->relu_forward((*conv1_)(x));
  y = (*conv3_)(bn2_->relu_forward((*conv2_)(y)));  // the modules run in torchvision's order
  return bn3_->relu_forward(y, downsample_ ? (*downsample_)(x) : x);
}

ResNet::ResNet(std::vector<std::int64_t> blocks, std::int64_t classes, std::int64_t in_channels,
               std::uint64_t seed) {
  MIXPREC_CHECK(blocks.size() == 4, ValueError, "ResNet",
                "needs the Bottleneck counts of 4 stages (ResNet-50: {3, 4, 6, 3}), got "
                    << blocks.size());
  for (const std::int64_t b : blocks) {
    MIXPREC_CHECK(b >= 1, ValueError, "ResNet", "every stage needs at least one block, got " << b);
  }
  MIXPREC_CHECK(classes >= 1 && in_channels >= 1, ValueError, "ResNet",
                "classes and in_channels must be >= 1, got " << classes << " and " << in_channels);
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_channels, 64, 7, 2, 3, false, seed));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(64));
  maxpool_ = register_module("maxpool", std::make_shared<MaxPool2d>(3, 2, 1));
  std::int64_t channels = 64;
  for (std::size_t s = 0; s < blocks.size(); ++s) {
    const std::int64_t width = std::int64_t{64} << s;
    auto stage = std::make_shared<Sequential>();
    for (std::int64_t i = 0; i < blocks[s]; ++i) {
      const std::int64_t stride = (s > 0 && i == 0) ? 2 : 1;
      const std::uint64_t block_seed = seed + 1000 * (s + 1) + 16 * static_cast<std::uint64_t>(i);
      stage->append(std::make_shared<Bottleneck>(channels, width, stride, block_seed));
      channels = Bottleneck::kExpansion * width;
    }
    stages_.push_back(register_module("layer" + std::to_string(s + 1), std::move(stage)));
  }
  fc_ = register_module("fc", std::make_shared<Linear>(channels, classes, true, seed + 9000));
}

Tensor ResNet::forward(const Tensor& x) {
  MIXPREC_CHECK(x.dim() == 4 && x.size(2) >= 32 && x.size(3) >= 32, ShapeError, "ResNet",
                "takes images [N, C, H, W] of at least 32x32 (five halvings to the last stage), got "
                    << to_string(x.shape()));
  Tensor h = (*maxpool_)(bn1_->relu_forward((*conv1_)(x)));
  for (const auto& stage : stages_) h = (*stage)(h);
  return (*fc_)(global_avg_pool2d(h));
}

std::shared_ptr<ResNet> resnet50(std::int64_t classes, std::uint64_t seed) {
  return std::make_shared<ResNet>(std::vector<std::int64_t>{3, 4, 6, 3}, classes, 3, seed);
}

}  // namespace mixprec::nn
