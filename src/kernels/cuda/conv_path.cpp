// The cuda convolution path choice (conv_path.h). Plain host code, compiled in every build:
// without the cuDNN path, cudnn_conv_refusal says so and every call takes the im2col path.
#include "kernels/cuda/conv_path.h"

#include <cstdlib>

#include "kernels/cuda/conv_cudnn.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cuda {

const char* conv_path_name(ConvPath p) {
  return p == ConvPath::cudnn ? "cuDNN graph (deterministic engine, timed once per shape)"
                              : "cuda im2col + cuBLASLt GEMM";
}

ConvPath parse_conv_path(std::string_view text) {
  if (text == "auto" || text == "cudnn") return ConvPath::cudnn;
  MIXPREC_CHECK(text == "im2col", ValueError, "conv2d",
                "MIXPREC_CUDA_CONV must be auto, cudnn or im2col, got '" << text << "'");
  return ConvPath::im2col;
}

ConvPath first_conv_path() {
  static const ConvPath first = [] {
    const char* env = std::getenv("MIXPREC_CUDA_CONV");
    return parse_conv_path(env != nullptr ? env : "auto");
  }();
  return first;
}

ConvChoice choose_conv_path(const Conv2dDesc& d, ConvPath from, bool reasons,
                            const char* loaded_why_none) {
  if (from != ConvPath::cudnn) {
    return {ConvPath::im2col, reasons ? "cudnn (MIXPREC_CUDA_CONV=im2col)" : ""};
  }
  const char* why = loaded_why_none != nullptr ? cudnn_conv_refusal_given(d, loaded_why_none)
                                               : cudnn_conv_refusal(d);
  if (why == nullptr) return {ConvPath::cudnn, ""};
  return {ConvPath::im2col, reasons ? std::string("cudnn (") + why + ")" : ""};
}

}  // namespace mixprec::kernels::cuda
