#pragma once
/// Convolution and pooling layers on NCHW tensors: Conv2d, MaxPool2d, AvgPool2d, GlobalAvgPool2d.
#include <cstdint>

#include "mixprec/nn/module.h"

namespace mixprec::nn {

/// conv2d(x, weight, bias, stride, padding): x [N, in, H, W] -> [N, out, Ho, Wo]. weight
/// [out, in, k, k] and bias [out] start as U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
/// fan_in = in * k * k (PyTorch's default, kaiming-uniform with a = sqrt(5)), drawn from seed
/// and stored in dtype. Parameters "weight" and "bias" (absent when bias is false).
class Conv2d : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size,
         std::int64_t stride = 1, std::int64_t padding = 0, bool bias = true,
         std::uint64_t seed = 0, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  const Tensor& weight() const { return weight_; }
  /// Undefined when constructed without bias.
  const Tensor& bias() const { return bias_; }
  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  std::int64_t kernel_size() const { return kernel_; }
  std::int64_t stride() const { return stride_; }
  std::int64_t padding() const { return padding_; }

 private:
  std::int64_t in_, out_, kernel_, stride_, padding_;
  Tensor weight_;  // handles sharing the registered parameters
  Tensor bias_;
};

/// max_pool2d(x, kernel, stride, padding); stride 0 means stride = kernel. Any dtype.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  /// The window size when the windows tile their input (stride = kernel, no padding), else 0.
  std::int64_t tiling_kernel() const {
    return (stride_ == kernel_ || stride_ == 0) && padding_ == 0 ? kernel_ : 0;  // 0: = kernel
  }

 private:
  std::int64_t kernel_, stride_, padding_;
};

/// avg_pool2d(x, kernel, stride, padding) (padding excluded from the count); stride 0 means
/// stride = kernel. Any dtype, sums in f32.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }

 private:
  std::int64_t kernel_, stride_, padding_;
};

/// global_avg_pool2d(x): [N, C, H, W] -> [N, C].
class GlobalAvgPool2d : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GlobalAvgPool2d"; }
};

}  // namespace mixprec::nn
