#pragma once
/// The residual block of ResNet-18/34 ("BasicBlock"): two 3x3 convolutions with batch norm and
/// ReLU, whose output is added to the input (through a 1x1 convolution and batch norm when the
/// stride or the channel count changes), followed by a ReLU.
#include <cstdint>
#include <memory>

#include "mixprec/nn/module.h"

namespace mixprec::nn {

class Conv2d;
class BatchNorm2d;
class Sequential;

/// x [N, in, H, W] -> relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), [N, out, H/s, W/s].
/// Children: conv1, bn1, conv2, bn2 and, when stride != 1 or in != out, shortcut (1x1 conv, BN).
/// Convolutions have no bias (the batch norm that follows makes one redundant).
class BasicBlock : public Module {
 public:
  BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride = 1,
             std::uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<Sequential> shortcut_;  // null: identity
};

}  // namespace mixprec::nn
