#pragma once
/// What the CUDA backend's run-time cuDNN loader found (src/kernels/cuda/cudnn_loader.cpp), on
/// the kernels floor with the loader; compiled in every build (built_with_cudnn says whether the
/// cuDNN path is).
#include <string>

namespace mixprec {

/// The cuDNN library the CUDA backend loads at run time (docs/cuda.md "How cuDNN is found"), or
/// why there is none: what `mixprec env` prints. Searched once per process, on first use.
struct CudnnInfo {
  bool built_with_cudnn = false;  ///< the cuDNN path is compiled in (CUDA and the frontend)
  std::string path;               ///< the libcudnn.so.9 loaded; empty when none
  std::string version;            ///< its cudnnGetVersion(), e.g. "9.19.0"
  std::string required;           ///< what the build needs, e.g. "9.x >= 9.19"
  /// Empty when path is not; else one line, e.g. "MIXPREC_CUDNN=off", "not found in: ...",
  /// "version 8.9.7 at PATH: need 9.x >= 9.19".
  std::string why_none;
};

/// Loads cuDNN if not done yet (no GPU needed) and says what was found.
CudnnInfo cudnn_info();

}  // namespace mixprec
