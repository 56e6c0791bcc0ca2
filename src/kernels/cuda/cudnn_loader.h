#pragma once
// Finds and opens libcudnn.so.9 at run time (docs/cuda.md "How cuDNN is found"). libmixprec
// links no cuDNN library: the cuDNN frontend runs in its dynamic-loading mode and resolves every
// cuDNN call with dlsym on the handle opened here. Plain host code (dlopen, no CUDA or cuDNN
// header), compiled in every build; without the cuDNN path it answers "built without cuDNN".
#include <cstddef>
#include <string>

namespace mixprec::kernels::cuda {

/// One search's answer: an open library, or one line saying why there is none.
struct CudnnLibrary {
  void* handle = nullptr;   ///< dlopen handle of libcudnn.so.9; null when none
  std::string path;         ///< the file opened (empty when none)
  std::size_t version = 0;  ///< cudnnGetVersion(), e.g. 91900 for 9.19.0
  std::string why_none;     ///< empty when handle is set
};

/// The cuDNN version the build was compiled against (CUDNN_VERSION, e.g. 91900); 0 in a build
/// without the cuDNN path. The library loaded must have its major and at least its minor.
std::size_t cudnn_built_version();

/// "9.x >= 9.19": the versions the build accepts.
std::string cudnn_required_text();

/// "9.19.0" from 91900 (cuDNN 9's encoding) or 8907 (cuDNN 8's).
std::string cudnn_version_text(std::size_t version);

/// Runs the search with `setting` as MIXPREC_CUDNN's value (null or empty: unset):
///  - "off": none;
///  - a path: that file, or libcudnn.so.9 in that folder, and nothing else;
///  - unset: dlopen("libcudnn.so.9") (LD_LIBRARY_PATH, the loader's cache), then the CUDA
///    toolkit's lib folders ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, /usr/local/cuda-*), then
///    the nvidia/cudnn/lib folder of an installed nvidia-cudnn-cu13 wheel in the usual
///    site-packages folders ($PYTHONPATH, $VIRTUAL_ENV, $CONDA_PREFIX, the environment of each
///    python3 on $PATH, ~/.local, /usr/local, /usr, /opt/conda, /opt/*/.venv, /opt/*/venv). The
///    first file that opens, has cuDNN's symbols and passes the version check wins (a refused
///    one is closed again and the search goes on).
/// Needs no GPU (cudnnGetVersion does not touch the device). Not cached: tests call it with
/// their own settings; keep_open = false closes the library again.
CudnnLibrary find_cudnn(const char* setting, bool keep_open);

/// The process's library: find_cudnn(getenv("MIXPREC_CUDNN"), true) on the first call
/// (thread-safe), cached for the process. A file that was found but refused (broken, or the
/// wrong version) is reported once on stderr in one line; "off" and "not found" are not.
/// Always none in a build without the cuDNN path.
const CudnnLibrary& cudnn_library();

/// Opens, from the folder of cudnn_library(), the libraries libcudnn.so.9 itself opens by name
/// (libcudnn_graph.so.9, the engines, heuristics, ops, cnn, adv), so that an LD_LIBRARY_PATH
/// naming another cuDNN cannot pair our libcudnn.so.9 with its sub-libraries; and makes
/// libcudart.so.13 (the frontend's dynamic mode dlopens it for a few runtime calls) and NVRTC
/// (cuDNN's runtime-compiled engines) loadable by their sonames from the toolkit's or a wheel's
/// folders when the loader cannot find them.
/// Empty on success, else why. Called once, before the first cuDNN handle is created.
std::string cudnn_preload_dependencies();

}  // namespace mixprec::kernels::cuda
