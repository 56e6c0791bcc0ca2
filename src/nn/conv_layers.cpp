#include "mixprec/nn/conv_layers.h"

#include <cmath>

#include "mixprec/ops/conv.h"

namespace mixprec::nn {
namespace {

// Pooling arguments are checked at construction so a bad model fails when built, not mid-run.
void check_pool_args(const char* layer, std::int64_t kernel, std::int64_t stride,
                     std::int64_t padding) {
  MIXPREC_CHECK(kernel >= 1, ValueError, layer, "kernel must be >= 1, got " << kernel);
  MIXPREC_CHECK(stride >= 0, ValueError, layer,
                "stride must be >= 1 (or 0 for stride = kernel), got " << stride);
  MIXPREC_CHECK(padding >= 0 && 2 * padding <= kernel, ValueError, layer,
                "padding must be in [0, kernel / 2], got " << padding);
}

}  // namespace

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size,
               std::int64_t stride, std::int64_t padding, bool bias, std::uint64_t seed,
               DType dtype)
    : in_(in_channels), out_(out_channels), kernel_(kernel_size), stride_(stride),
      padding_(padding) {
  MIXPREC_CHECK(in_channels > 0 && out_channels > 0, ValueError, "Conv2d",
                "channels must be positive, got in=" << in_channels << " out=" << out_channels);
  MIXPREC_CHECK(kernel_size > 0, ValueError, "Conv2d",
                "kernel_size must be positive, got " << kernel_size);
  MIXPREC_CHECK(stride > 0, ValueError, "Conv2d", "stride must be positive, got " << stride);
  MIXPREC_CHECK(padding >= 0, ValueError, "Conv2d", "padding must be >= 0, got " << padding);
  const float bound =
      1.0f / std::sqrt(static_cast<float>(in_channels * kernel_size * kernel_size));
  // Distinct streams for weight and bias (as in Linear) so changing one never shifts the other.
  weight_ = register_parameter(
      "weight", Tensor::uniform({out_, in_, kernel_, kernel_}, seed * 2 + 1, -bound, bound, dtype));
  if (bias) {
    bias_ = register_parameter("bias", Tensor::uniform({out_}, seed * 2 + 2, -bound, bound, dtype));
  }
}

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight_, bias_, stride_, padding_); }

MaxPool2d::MaxPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t padding)
    : kernel_(kernel), stride_(stride), padding_(padding) {
  check_pool_args("MaxPool2d", kernel, stride, padding);
}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_, stride_, padding_); }

AvgPool2d::AvgPool2d(std::int64_t kernel, std::int64_t stride, std::int64_t padding)
    : kernel_(kernel), stride_(stride), padding_(padding) {
  check_pool_args("AvgPool2d", kernel, stride, padding);
}

Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, kernel_, stride_, padding_); }

Tensor GlobalAvgPool2d::forward(const Tensor& x) { return global_avg_pool2d(x); }

}  // namespace mixprec::nn
