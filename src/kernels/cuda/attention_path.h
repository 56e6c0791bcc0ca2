#pragma once
/// Which of the cuda backend's attention implementations takes a call (attention.cu runs it).
/// Host logic only, so tests check it on machines without a GPU.
///
/// The paths, fastest first; a call takes the first that accepts it:
///  - cudnn: cuDNN's fused SDPA (attention_cudnn.h), where cuDNN is loaded;
///  - flash: our Tensor-Core kernels (attention_flash.h);
///  - gemm: batched cuBLASLt GEMMs over f32 score matrices (attention_gemm.h), no additive mask;
///  - tiles: f32 flash tiles on CUDA cores (attention.cu), anything.
/// MIXPREC_ATTENTION=auto|cudnn|flash|gemm|tiles starts the choice at that path (auto: cudnn).
#include <initializer_list>
#include <string>
#include <string_view>

#include "kernels/attention.h"

namespace mixprec::kernels::cuda {

enum class AttentionPath { cudnn, flash, gemm, tiles };

/// What the verbose log calls a path.
const char* attention_path_name(AttentionPath p);

/// "auto" (the cudnn path), or a path's short name; ValueError naming the accepted values.
AttentionPath parse_attention_path(std::string_view text);

/// MIXPREC_ATTENTION, parsed at the first call (ValueError then, if it names no path).
AttentionPath first_attention_path();

struct AttentionChoice {
  AttentionPath path;
  std::string skipped;  ///< the faster paths that refused and why (when asked for)
};

/// The first path from `from` on that accepts d; `buffers` are the call's operands (the flash
/// kernels need them 16-byte aligned). With `reasons`, skipped says why each faster path refused.
AttentionChoice choose_attention_path(const AttentionDesc& d,
                                      std::initializer_list<const void*> buffers,
                                      AttentionPath from, bool reasons);

}  // namespace mixprec::kernels::cuda
