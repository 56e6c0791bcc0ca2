#pragma once
/// Which of the cuda backend's convolution implementations takes a call (conv.cu runs it).
/// Host logic only, so tests check it on machines without a GPU.
///
/// The paths, fastest first; a call takes the first that accepts it:
///  - cudnn: cuDNN's convolutions (conv_cudnn.h), where cuDNN is loaded;
///  - im2col: our im2col / col2im kernels around cuBLASLt GEMMs (conv.cu), anything.
/// MIXPREC_CUDA_CONV=auto|cudnn|im2col starts the choice at that path (auto: cudnn). (Not
/// MIXPREC_CONV: that one is the cpu backend's, ref|onednn.)
#include <string>
#include <string_view>

#include "kernels/conv.h"

namespace mixprec::kernels::cuda {

enum class ConvPath { cudnn, im2col };

/// What the verbose log calls a path.
const char* conv_path_name(ConvPath p);

/// "auto" (the cudnn path), "cudnn" or "im2col"; ValueError naming the accepted values.
ConvPath parse_conv_path(std::string_view text);

/// MIXPREC_CUDA_CONV, parsed at the first call (ValueError then, if it names no path).
ConvPath first_conv_path();

struct ConvChoice {
  ConvPath path;
  std::string skipped;  ///< the faster paths that refused and why (when asked for)
};

/// The first path from `from` on that accepts d. `loaded_why_none` stands for the cuDNN
/// loader's answer (empty: loaded; nullptr: ask the loader), so tests can check the choice for
/// any library state. With `reasons`, skipped says why each faster path refused.
ConvChoice choose_conv_path(const Conv2dDesc& d, ConvPath from, bool reasons,
                            const char* loaded_why_none = nullptr);

}  // namespace mixprec::kernels::cuda
