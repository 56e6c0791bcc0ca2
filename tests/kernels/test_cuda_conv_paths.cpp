// Which convolution path the cuda backend gives a call, and the cuDNN plan cache's key: host
// logic (src/kernels/cuda/conv_path.h, conv_cudnn.h), checked on every machine, GPU or not, in
// every build (without the cuDNN path the refusals are the same; the loader's answer is given).
// That cuDNN's convolutions compute the spec is test_cudnn_conv_gpu.cpp's job, on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/conv_path.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cuda {
namespace {

/// A ResNet bottleneck's 3x3 convolution, channels-last bf16, no bias.
Conv2dDesc takeable() {
  Conv2dDesc d;
  d.n = 8, d.c = 64, d.h = 56, d.w = 56;
  d.o = 64, d.kh = 3, d.kw = 3;
  d.stride = 1, d.padding = 1;
  d.dtype = DType::bf16;
  d.bias_dtype = DType::bf16;
  d.channels_last = true;
  return d;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaConvPaths, CudnnTakesEveryDtypeLayoutAndBiasWhenLoaded) {
  for (DType t : {DType::bf16, DType::f16, DType::f32}) {
    for (bool channels_last : {false, true}) {
      for (DType bias : {t, DType::f32}) {
        Conv2dDesc d = takeable();
        d.dtype = t;
        d.channels_last = channels_last;
        d.has_bias = true;
        d.bias_dtype = bias;
        const ConvChoice c = choose_conv_path(d, ConvPath::cudnn, true, "");
        EXPECT_EQ(c.path, ConvPath::cudnn)
            << name(t) << " channels-last " << channels_last << ": " << c.skipped;
        EXPECT_EQ(c.skipped, "");
      }
    }
  }
}

TEST(CudaConvPaths, WithoutALibraryTheCallTakesIm2colAndSaysWhy) {
  const ConvChoice c = choose_conv_path(takeable(), ConvPath::cudnn, true, "MIXPREC_CUDNN=off");
  EXPECT_EQ(c.path, ConvPath::im2col);
  EXPECT_EQ(c.skipped, "cudnn (cuDNN not loaded: MIXPREC_CUDNN=off)");
  // Without reasons asked for, none are built.
  EXPECT_EQ(choose_conv_path(takeable(), ConvPath::cudnn, false, "MIXPREC_CUDNN=off").skipped, "");
}

TEST(CudaConvPaths, CudnnRefusesWhatItCannotTakeAndSaysWhy) {
  const auto skipped = [](const Conv2dDesc& d) {
    const ConvChoice c = choose_conv_path(d, ConvPath::cudnn, true, "");
    EXPECT_EQ(c.path, ConvPath::im2col) << c.skipped;
    return c.skipped;
  };
  Conv2dDesc d = takeable();
  d.dtype = DType::f8e4m3;
  EXPECT_TRUE(has(skipped(d), "dtype f8e4m3")) << skipped(d);
  d = takeable();
  d.has_bias = true;
  d.bias_dtype = DType::f16;  // beside bf16 data
  EXPECT_TRUE(has(skipped(d), "bias dtype f16")) << skipped(d);
  // A bias dtype is only read with a bias.
  d.has_bias = false;
  EXPECT_EQ(choose_conv_path(d, ConvPath::cudnn, true, "").path, ConvPath::cudnn);
  for (std::int64_t Conv2dDesc::*extent :
       {&Conv2dDesc::n, &Conv2dDesc::c, &Conv2dDesc::o, &Conv2dDesc::h}) {
    d = takeable();
    d.*extent = 0;
    EXPECT_TRUE(has(skipped(d), "extent is zero")) << skipped(d);
  }
  // The dtype is named before the library: a desc no cuDNN could take says so on any machine.
  d = takeable();
  d.dtype = DType::f8e5m2;
  EXPECT_TRUE(has(cudnn_conv_refusal_given(d, "MIXPREC_CUDNN=off"), "dtype f8e5m2"));
}

TEST(CudaConvPaths, MixprecCudaConvIm2colSkipsCudnn) {
  const ConvChoice c = choose_conv_path(takeable(), ConvPath::im2col, true, "");
  EXPECT_EQ(c.path, ConvPath::im2col);
  EXPECT_TRUE(has(c.skipped, "MIXPREC_CUDA_CONV=im2col")) << c.skipped;
}

TEST(CudaConvPaths, MixprecCudaConvNamesAPath) {
  EXPECT_EQ(parse_conv_path("auto"), ConvPath::cudnn);
  EXPECT_EQ(parse_conv_path("cudnn"), ConvPath::cudnn);
  EXPECT_EQ(parse_conv_path("im2col"), ConvPath::im2col);
  try {
    parse_conv_path("onednn");  // the cpu backend's MIXPREC_CONV value, not this knob's
    FAIL() << "accepted 'onednn'";
  } catch (const ValueError& e) {
    EXPECT_TRUE(has(e.what(), "MIXPREC_CUDA_CONV must be auto, cudnn or im2col")) << e.what();
  }
  EXPECT_NE(std::string(conv_path_name(ConvPath::cudnn)), conv_path_name(ConvPath::im2col));
}

TEST(CudaConvPaths, RunsNothingWhenRefused) {
  Conv2dDesc d = takeable();
  d.dtype = DType::f8e4m3;
  EXPECT_FALSE(cudnn_conv2d(d, nullptr, nullptr, nullptr, nullptr));
  EXPECT_TRUE(has(cudnn_conv_last_error(), "dtype f8e4m3")) << cudnn_conv_last_error();
  EXPECT_FALSE(cudnn_conv2d_backward_data(d, nullptr, nullptr, nullptr));
  EXPECT_TRUE(has(cudnn_conv_last_error(), "dtype f8e4m3")) << cudnn_conv_last_error();
  EXPECT_FALSE(cudnn_conv2d_backward_weights(d, nullptr, nullptr, nullptr));
  EXPECT_TRUE(has(cudnn_conv_last_error(), "dtype f8e4m3")) << cudnn_conv_last_error();
}

TEST(CudnnConvKey, DescriptorsThatDifferAnywhereGetDifferentKeys) {
  const Conv2dDesc base = takeable();
  // One change per field of Conv2dDesc; a field added to the desc belongs here and in the key.
  const std::vector<std::pair<const char*, std::function<void(Conv2dDesc&)>>> changes = {
      {"n", [](Conv2dDesc& d) { d.n += 1; }},
      {"c", [](Conv2dDesc& d) { d.c += 1; }},
      {"h", [](Conv2dDesc& d) { d.h += 1; }},
      {"w", [](Conv2dDesc& d) { d.w += 1; }},
      {"o", [](Conv2dDesc& d) { d.o += 1; }},
      {"kh", [](Conv2dDesc& d) { d.kh = 1; }},
      {"kw", [](Conv2dDesc& d) { d.kw = 1; }},
      {"stride", [](Conv2dDesc& d) { d.stride = 2; }},
      {"padding", [](Conv2dDesc& d) { d.padding = 0; }},
      {"dtype", [](Conv2dDesc& d) { d.dtype = DType::f16; }},
      {"has_bias", [](Conv2dDesc& d) { d.has_bias = true; }},
      {"bias_dtype", [](Conv2dDesc& d) { d.bias_dtype = DType::f32; }},
      {"channels_last", [](Conv2dDesc& d) { d.channels_last = false; }},
      {"tf32", [](Conv2dDesc& d) { d.tf32 = true; }},
  };
  const CudnnConvKey key = cudnn_conv_key(ConvPass::forward, base, 0, 16);
  EXPECT_EQ(key, cudnn_conv_key(ConvPass::forward, takeable(), 0, 16));
  std::map<CudnnConvKey, std::string> keys{{key, "base"}};
  for (const auto& [field, change] : changes) {
    Conv2dDesc d = base;
    change(d);
    const CudnnConvKey k = cudnn_conv_key(ConvPass::forward, d, 0, 16);
    EXPECT_FALSE(k == key) << field;
    EXPECT_TRUE(key < k || k < key) << field << ": the map would take them for one plan";
    EXPECT_TRUE(keys.emplace(k, field).second) << field << " collides with " << keys[k];
  }
  // The pass, the device and the operands' alignment are part of the key too.
  for (const ConvPass pass : {ConvPass::backward_data, ConvPass::backward_weights}) {
    EXPECT_TRUE(keys.emplace(cudnn_conv_key(pass, base, 0, 16), conv_pass_name(pass)).second);
  }
  EXPECT_TRUE(keys.emplace(cudnn_conv_key(ConvPass::forward, base, 1, 16), "device").second);
  EXPECT_TRUE(keys.emplace(cudnn_conv_key(ConvPass::forward, base, 0, 8), "alignment").second);
  EXPECT_EQ(keys.size(), changes.size() + 5);
}

}  // namespace
}  // namespace mixprec::kernels::cuda
