#include "mixprec/nn/residual.h"

#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/elementwise.h"

namespace mixprec::nn {

BasicBlock::BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride,
                       std::uint64_t seed) {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_channels, out_channels, 3, stride,
                                                             1, /*bias=*/false, seed));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(out_channels));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(out_channels, out_channels, 3, 1, 1,
                                                             /*bias=*/false, seed + 1));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    shortcut_ = register_module(
        "shortcut", sequential({std::make_shared<Conv2d>(in_channels, out_channels, 1, stride, 0,
                                                         /*bias=*/false, seed + 2),
                                std::make_shared<BatchNorm2d>(out_channels)}));
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  // Each norm and the ReLU after it (the shortcut added between, at the end) as one op.
  const Tensor y = (*conv2_)(bn1_->relu_forward((*conv1_)(x)));
  return bn2_->relu_forward(y, shortcut_ ? (*shortcut_)(x) : x);
}

}  // namespace mixprec::nn
