#pragma once
/// The bottleneck ResNets (ResNet-50/101/152) laid out as torchvision's: the same module names,
/// parameter and buffer shapes, so a torchvision state dict maps onto mixprec's by name (its
/// `num_batches_tracked` counters aside: mixprec's batch norm keeps none).
#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/nn/module.h"

namespace mixprec::nn {

class Conv2d;
class BatchNorm2d;
class Sequential;

/// torchvision's Bottleneck (ResNet v1.5: the stride sits on the 3x3 convolution):
/// x [N, in, H, W] -> relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + downsample(x)),
/// [N, 4 * width, H/s, W/s]. conv1 is 1x1 in -> width, conv2 3x3 width -> width with stride s,
/// conv3 1x1 width -> 4 * width; downsample (a 1x1 convolution with stride s, then batch norm)
/// exists when s != 1 or in != 4 * width. No convolution has a bias.
class Bottleneck : public Module {
 public:
  static constexpr std::int64_t kExpansion = 4;
  Bottleneck(std::int64_t in_channels, std::int64_t width, std::int64_t stride = 1,
             std::uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Bottleneck"; }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<Sequential> downsample_;  // null: identity
};

/// ResNet with bottleneck stages, torchvision's layout: conv1 (7x7, stride 2, 64 channels),
/// bn1, ReLU, 3x3 max pool (stride 2, padding 1), layer1..layer4 (Sequentials of Bottlenecks
/// of widths 64, 128, 256, 512; the first block of layer2..4 has stride 2), global average
/// pool, fc (2048 -> classes). x [N, channels, H, W] with H, W >= 32 -> logits [N, classes].
class ResNet : public Module {
 public:
  /// blocks: Bottlenecks per stage ({3, 4, 6, 3} is ResNet-50, {3, 4, 23, 3} ResNet-101,
  /// {3, 8, 36, 3} ResNet-152).
  ResNet(std::vector<std::int64_t> blocks, std::int64_t classes, std::int64_t in_channels = 3,
         std::uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet"; }

 private:
  std::shared_ptr<Module> conv1_, maxpool_, fc_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<Module>> stages_;
};

/// ResNet-50: 25,557,032 parameters with 1000 classes, as torchvision's resnet50.
std::shared_ptr<ResNet> resnet50(std::int64_t classes = 1000, std::uint64_t seed = 0);

}  // namespace mixprec::nn
