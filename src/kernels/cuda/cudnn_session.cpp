// The cuDNN state the cuda backend's graphs share (cudnn_session.h). Compiled only with the
// cuDNN path: CMake gives this file the frontend's include folder and its dynamic-loading mode
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING), where every cuDNN call is a dlsym on
// cudnn_frontend::cudnn_dlhandle, which this file defines and sets to the handle
// cudnn_loader.cpp opened. Only the frontend's shim is included (handle, stream and error
// calls): the graph API's templates belong to the files that build graphs.
#if defined(MIXPREC_HAVE_CUDNN)

#include "kernels/cuda/cudnn_session.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <unordered_map>  // before the shim, which uses both and includes neither
#include <utility>

#include <cudnn_frontend_shim.h>

#include "core/cuda_runtime.h"
#include "kernels/cuda/cudnn_loader.h"
#include "kernels/cuda/stream_bridge.h"

// The frontend's dynamic mode declares this and resolves every cuDNN symbol through it.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace mixprec::kernels::cuda {
namespace {

namespace fe = cudnn_frontend;

/// The handles (one per device) and the lock that serialises their use.
struct State {
  std::mutex mutex;
  std::string init_error;  ///< non-empty: the frontend could not be set up
  std::map<int, cudnnHandle_t> handles;
};

State& state() {
  static State* s = [] {
    auto* st = new State;  // never destroyed: plans must not outlive cuDNN at process exit
    const CudnnLibrary& lib = cudnn_library();
    if (lib.handle == nullptr) {
      st->init_error = "cuDNN not loaded: " + lib.why_none;
      return st;
    }
    const std::string pre = cudnn_preload_dependencies();
    if (!pre.empty()) {
      st->init_error = "cuDNN's libraries: " + pre;
      return st;
    }
    fe::cudnn_dlhandle = lib.handle;
    return st;
  }();
  return *s;
}

}  // namespace

CudnnCall::CudnnCall() {
  State& st = state();
  lock_ = std::unique_lock<std::mutex>(st.mutex);
  if (!st.init_error.empty()) {
    error_ = st.init_error;
    return;
  }
  if (const cudaError_t e = cudaGetDevice(&device_); e != cudaSuccess) {
    error_ = std::string("cudaGetDevice failed: ") + cudaGetErrorName(e);
    return;
  }
  cudnnHandle_t h = nullptr;
  if (auto it = st.handles.find(device_); it != st.handles.end()) {
    h = it->second;
  } else {  // the first call on this device: needs the driver and a GPU
    const cudnnStatus_t status = fe::detail::create_handle(&h);
    if (status != CUDNN_STATUS_SUCCESS) {
      error_ = std::string("cudnnCreate failed: ") + fe::detail::get_error_string(status);
      return;
    }
    st.handles.emplace(device_, h);
  }
  if (fe::detail::set_stream(h, backend_stream()) != CUDNN_STATUS_SUCCESS) {
    error_ = "cudnnSetStream failed";
    return;
  }
  handle_ = h;
}

std::int32_t cudnn_sm_version(int device, std::string& error) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    error = "cudaDeviceGetAttribute failed";
    return 0;
  }
  return major * 10 + minor;
}

CudnnWorkspace::CudnnWorkspace(std::size_t bytes)
    : bytes_(bytes), p_(bytes ? mixprec::detail::cuda_scratch_acquire(bytes, pool_) : nullptr) {}

CudnnWorkspace::~CudnnWorkspace() { mixprec::detail::cuda_scratch_release(p_, bytes_, pool_); }

std::int64_t cudnn_pointer_alignment(std::initializer_list<const void*> ptrs) {
  std::int64_t alignment = 16;
  for (const void* p : ptrs) {
    if (p == nullptr) continue;
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    while (address % static_cast<std::uintptr_t>(alignment) != 0) alignment /= 2;
  }
  return alignment;
}

}  // namespace mixprec::kernels::cuda

#endif  // MIXPREC_HAVE_CUDNN
