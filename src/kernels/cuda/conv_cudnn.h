#pragma once
/// 2-D convolutions through cuDNN's graph API (the cuDNN frontend, conv_fprop / conv_dgrad /
/// conv_wgrad): the cuda backend's first path when cuDNN is loaded (cudnn_loader.h). conv.cu's
/// entries call it first (conv_path.h) and run their im2col GEMMs when it refuses or returns
/// false.
///
/// cuDNN reads and writes the caller's buffers in place: activations NCHW or channels-last as
/// the descriptor says (one logical [n, c, h, w] tensor with that layout's strides, no copies),
/// weights OIHW. bf16, f16 and f32 data with f32 compute: products are exact in f32 (f32 data:
/// also on TF32 Tensor Cores when Conv2dDesc::tf32 allows it), sums in f32, each output rounded
/// once to the dtype. Only deterministic engines run (two calls give the same bits), and none
/// whose numerical notes break that contract (reduced-precision reductions, down-converted
/// inputs, FFT, Winograd).
///
/// The first call per shape builds the graph, builds the engines' plans and times each one on
/// the backend's stream (a few runs with CUDA events, like PyTorch's cudnn.benchmark), keeping
/// the fastest; later calls only run it.
#include <cstdint>
#include <tuple>

#include "kernels/conv.h"

namespace mixprec::kernels::cuda {

/// The three convolutions cuDNN runs for a Conv2dDesc.
enum class ConvPass : std::uint8_t { forward, backward_data, backward_weights };

/// What the verbose log calls a pass ("fprop", "dgrad", "wgrad").
const char* conv_pass_name(ConvPass pass);

/// Why cuDNN cannot take d (nullptr when it can): cuDNN not loaded (and why), a dtype other
/// than bf16/f16/f32, a bias dtype other than dtype or f32, or an extent that is zero (cuDNN
/// takes no empty tensor; the im2col path writes the zero sums). The text lives until the
/// thread's next call.
const char* cudnn_conv_refusal(const Conv2dDesc& d);

/// cudnn_conv_refusal with `loaded_why_none` standing for the loader's answer (empty: loaded;
/// nullptr: not asked), so tests can check every refusal whatever this machine's cuDNN is.
const char* cudnn_conv_refusal_given(const Conv2dDesc& d, const char* loaded_why_none);

/// y = conv(x, weight) (+ bias through a pointwise add in the same graph: the f32 sum plus the
/// bias, rounded once). Returns false, having written nothing that the im2col path would not
/// overwrite, when refused or when cuDNN cannot build or run the graph
/// (cudnn_conv_last_error() says why).
bool cudnn_conv2d(const Conv2dDesc& d, const void* x, const void* weight, const void* bias,
                  void* y);

/// dx = the gradient w.r.t. x from dy and weight (overwrites dx). Returns false as cudnn_conv2d.
bool cudnn_conv2d_backward_data(const Conv2dDesc& d, const void* dy, const void* weight,
                                void* dx);

/// dweight = the gradient w.r.t. the weight from x and dy (overwrites dweight). The bias
/// gradient is not cuDNN's: conv.cu's reduction computes it. Returns false as cudnn_conv2d.
bool cudnn_conv2d_backward_weights(const Conv2dDesc& d, const void* x, const void* dy,
                                   void* dweight);

/// Why this thread's last cudnn_conv2d* returned false ("" after a success): for the log.
const char* cudnn_conv_last_error();

/// Everything a built convolution graph depends on: the plan cache's key. Every field of the
/// descriptor is kept as given (a field a pass does not read costs at most one more plan), so
/// two descriptors that differ anywhere never share a plan.
struct CudnnConvKey {
  ConvPass pass = ConvPass::forward;
  DType dtype = DType::f32;
  DType bias_dtype = DType::f32;
  bool has_bias = false;
  bool channels_last = false;
  bool tf32 = false;
  int device = 0;
  std::int64_t alignment = 16;  ///< the operands' common pointer alignment in bytes (<= 16)
  std::int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, stride = 1, padding = 0;

  auto tie() const {
    return std::tie(pass, dtype, bias_dtype, has_bias, channels_last, tf32, device, alignment,
                    n, c, h, w, o, kh, kw, stride, padding);
  }
  bool operator<(const CudnnConvKey& other) const { return tie() < other.tie(); }
  bool operator==(const CudnnConvKey& other) const { return tie() == other.tie(); }
};

/// The key of (pass, d) on `device` with operands aligned to `alignment` bytes.
CudnnConvKey cudnn_conv_key(ConvPass pass, const Conv2dDesc& d, int device,
                            std::int64_t alignment);

}  // namespace mixprec::kernels::cuda
