#pragma once
/// Direct convolution for layers with few input channels (a network's first layer: 1 channel
/// for grayscale, 3 for RGB), forward and weight gradient, stride 1, any kernel and padding.
/// oneDNN pads the channels of such layers to 16 for its blocked kernels (or runs a slow
/// im2col route on NCHW), so there it spends several times the output's memory traffic; here
/// each output costs its c * kh * kw FMAs (conv_direct_simd.cpp). kernels::conv2d* (conv.cpp)
/// routes the passes this covers here.
#include <cstdint>

#include "kernels/conv.h"
#include "kernels/cpu/conv_onednn.h"

namespace mixprec::kernels::cpu {

/// Most input channels the direct kernel takes: beyond a few, oneDNN's blocked kernels win.
inline constexpr std::int64_t kDirectMaxChannels = 4;

/// Whether the direct kernel runs this pass: forward or backward_weights, stride 1, at most
/// kDirectMaxChannels input channels, f32, bf16 or f16, every extent > 0, NCHW.
bool conv_direct_covers(ConvPass pass, const Conv2dDesc& d);

/// y = conv(x, weight) + bias (bias null when !d.has_bias); d must be covered.
void conv_direct_forward(const Conv2dDesc& d, const void* x, const void* weight,
                         const void* bias, void* y);
/// dweight and, when dbias is not null, dbias (d.bias_dtype), overwritten; d must be covered.
void conv_direct_backward_weights(const Conv2dDesc& d, const void* x, const void* dy,
                                  void* dweight, void* dbias);

}  // namespace mixprec::kernels::cpu
